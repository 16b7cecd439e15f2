// Package discover is the discover suite (orbitkv-bench discover):
// discovery of 32 and 1,000 hashes from the shared-memory index against
// the QueryBundle round trip, and the Manager's CPU with 4 clients at
// 10 kHz. MeasureDiscover is also run by the peers suite.
package discover
