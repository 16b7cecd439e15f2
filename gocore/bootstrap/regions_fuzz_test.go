package bootstrap

import (
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// refusingGPU is a session.GPUMapper double that refuses every mapping (a
// fault no driver produces on demand): the fuzz
// target reaches the CUDA fields' validation without a driver, and a
// mapping error must still come back naming a field.
type refusingGPU struct{}

func (refusingGPU) MapIPC([16]byte, []byte, uint64, uint64) (session.DeviceMapping, error) {
	return nil, errors.New("fuzz: not mapped")
}

func (refusingGPU) MapVMM([16]byte, int, uint64, uint64, uint64) (session.DeviceMapping, error) {
	return nil, errors.New("fuzz: not mapped")
}

// FuzzRegisterBuffersRegions decodes arbitrary bytes as a RegisterBuffers
// request and validates its regions (memfd and CUDA kinds) against one
// fd, with and without a GPU mapper: no input may panic, and every refusal
// names a field of the request.
func FuzzRegisterBuffersRegions(f *testing.F) {
	seed := func(r ...*lifecyclepb.BufferRegion) {
		b, err := proto.Marshal(&lifecyclepb.RegisterBuffersRequest{ClientToken: 1, Regions: r})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	uuid := make([]byte, 16)
	seed(&lifecyclepb.BufferRegion{Bytes: 8192, Layers: 1, PageBytes: 4096, PageCount: 2})
	seed(&lifecyclepb.BufferRegion{HandleKind: lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_IPC, CudaIpcHandle: make([]byte, 64),
		DeviceUuid: uuid, Bytes: 8192, Layers: 1, PageBytes: 4096, PageCount: 2})
	seed(&lifecyclepb.BufferRegion{HandleKind: lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_VMM_FD, AllocBytes: 1 << 21,
		DeviceUuid: uuid, Offset: 4096, Bytes: 8192, Layers: 1, PageBytes: 4096, PageCount: 2})
	seed(&lifecyclepb.BufferRegion{HandleKind: 9, Bytes: 1, Layers: 1, PageBytes: 1, PageCount: 1})
	file, err := os.CreateTemp(f.TempDir(), "region")
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		var req lifecyclepb.RegisterBuffersRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		for _, gpu := range []session.GPUMapper{nil, refusingGPU{}} {
			bufs, _, aerr := buffersFromRequest(&req, []*os.File{file}, nil, gpu)
			for i := range bufs {
				closeBuffer(&bufs[i])
			}
			if aerr != nil && aerr.field != "regions" && !strings.HasPrefix(aerr.field, "regions[") {
				t.Fatalf("refusal names %q, not a field of the regions: %v", aerr.field, aerr.msg)
			}
		}
	})
}
