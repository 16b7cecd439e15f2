// Package policy is the policy suite (orbitkv-bench policy): eviction
// policies beside LRU and the offline optimum on a Mooncake trace,
// simulated at 5-50% capacity, hit ratios per capacity. Method:
// bench/README.md "policy".
package policy
