package main

import (
	"errors"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// The exit statuses of orbitkv-manager, by the class of what stopped it
// (--help's "Exit status", docs/operating.md "Exit status"). A systemd
// unit's RestartPreventExitStatus= lists the ones a restart cannot cure.
const (
	exitInternal   = 1 // anything not classed below: a bug or an unexpected system error
	exitConfig     = 2 // configuration: a flag, variable, config file key or value
	exitForced     = 3 // a shutdown that ran past --shutdown-timeout
	exitResource   = 4 // resources: memory, hugepages, the SSD directory or its disk space, eBPF, a CUDA device
	exitAddress    = 5 // an address: a socket path or TCP port in use, not permitted, or in an unsafe directory
	exitDependency = 6 // a dependency: the cluster's etcd catalog
)

// exitStatusHelp is the "Exit status" part of --help.
const exitStatusHelp = `Exit status:
  0  stopped cleanly (SIGTERM, SIGINT, a drain), or --check found nothing wrong
  1  an internal error
  2  configuration: a flag, variable, config file key or value (nothing was started)
  3  the shutdown ran past --shutdown-timeout
  4  resources: memory, hugepages, the SSD directory or its disk space, eBPF, a CUDA device
  5  address: a socket path or TCP port in use, not permitted, or in an unsafe directory
  6  dependency: the cluster's etcd catalog cannot be reached`

// classOf is the exit status of a start refusal (limit.Refused) of each
// Spec field; a field not listed is exitInternal.
var classOf = map[string]int{
	"ram.CapacityBytes": exitResource, "ram.Hugepages": exitResource, "ssd.Dir": exitResource, "ssd.CapacityBytes": exitResource,
	"manager.EBPF": exitResource, "cache.CopyBackend": exitResource,
	"bootstrap.Path": exitAddress, "manager.OperatorSocket": exitAddress, "manager.HTTPAddr": exitAddress,
	"manager.Cluster.PeerListen": exitAddress, "manager.Cluster.TransferListen": exitAddress, "transfer.ServerSpec.Addr": exitAddress,
	"manager.Cluster.Catalog.Endpoints": exitDependency,
}

// className names an exit status's class in the log ("config", ...).
var className = map[int]string{exitInternal: "internal", exitConfig: "config", exitForced: "shutdown-forced",
	exitResource: "resource", exitAddress: "address", exitDependency: "dependency"}

// classify is the exit status of err, an error of manager.New or of a
// preflight check: exitConfig when any part is a limit.Error (a value
// outside its limit), else the class of the first refusal's field, else
// exitInternal.
func classify(err error) int {
	fields, _ := limit.Split(err)
	code := 0
	for _, f := range fields {
		var le *limit.Error
		var re *limit.Refused
		switch {
		case errors.As(f, &le):
			return exitConfig
		case errors.As(f, &re) && code == 0:
			code = classOf[re.Field]
		}
	}
	if code == 0 {
		return exitInternal
	}
	return code
}
