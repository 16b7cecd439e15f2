package content

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

// RestoreTimeout bounds one RestoreWait.
const RestoreTimeout = 10 * time.Second

// Namespace is the cache identity every replay client shares, so the
// clients hit each other's blocks as engines of one model would. Each run
// salts it (TenantSalt) with a run id, so a replay against a Manager that
// served an earlier run (--socket) starts from an empty cache, as the bound
// assumes.
var Namespace = client.NamespaceSpec{
	ModelID:     "mooncake-trace-replay",
	Dtype:       "bfloat16",
	KVLayout:    "orbitkv-bench",
	BlockTokens: 512,
	TPSize:      1,
	PPSize:      1,
	CPSize:      1,
}
