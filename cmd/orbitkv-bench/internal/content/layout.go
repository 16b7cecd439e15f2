package content

import ()

// Limits of the replay flags.
const (
	MaxReplayClients = 64
	MaxLayers        = 256
	PageAlign        = 64 // okv_buffer_alloc wants page bytes a multiple of 64
)
