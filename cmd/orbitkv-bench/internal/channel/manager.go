package channel

import (
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
)

// channelRAMCapacity is the RAM tier of the channel suite's Manager: Ping
// never touches the tier, and a small one starts in well under a second
// where pre-faulting the 4 GiB default takes seconds (more than the start
// timeout on a loaded VM). --manager-args --ram-capacity overrides it.
const channelRAMCapacity = 64 << 20

// startManager starts bin/orbitkv-manager for the channel suite: on a
// temporary bootstrap socket with a channelRAMCapacity RAM tier,
// --poll-mode and then --manager-args (which win).
func startManager(cfg *ChannelConfig) (*managerproc.Manager, error) {
	return managerproc.Launch(managerproc.RAMSpec(cfg.ManagerBin, channelRAMCapacity,
		append([]string{"--poll-mode", cfg.PollMode}, cfg.ManagerArgs...)))
}
