// Package query is the query suite (orbitkv-bench query): QueryBundle of
// 1 to 10,000 hashes among 1M resident blocks (round trip, and the
// Manager's server-side ns per hash from /metrics) and the Poll of a
// pending ticket, beside Ping and a bare open-addressing table as the
// machine's yardstick. Method: bench/README.md "query".
package query
