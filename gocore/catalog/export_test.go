package catalog

// crash stops the catalog as a killed Manager would: the background
// goroutines end and the connection to etcd closes, and nothing revokes
// the lease, so the records stay until it expires.
func (c *Catalog) crash() {
	c.closed.Store(true)
	c.cancel()
	c.wg.Wait()
	c.cli.Close()
}
