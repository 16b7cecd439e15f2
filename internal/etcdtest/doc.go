// Package etcdtest runs real etcd servers inside a test process
// (go.etcd.io/etcd/server/v3/embed): a cluster of n members on 127.0.0.1
// with ports from the OS and data directories under the test's TempDir
// (Start; StartWith for https client URLs that require a client
// certificate of a test CA, NewTLS, or for other server limits), members
// that can be stopped and started again on the same ports and data, and a
// TCP proxy that cuts a client off from etcd on demand.
//
// Only tests import it: it lives in the module root's internal/ (as
// fdcheck does), so the Manager binary never links the etcd server
// (gocore/manager's layout test checks that).
package etcdtest
