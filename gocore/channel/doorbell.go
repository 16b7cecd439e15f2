package channel

import (
	"encoding/binary"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// writeDoorbellHeader fills line 0 of struct okv_doorbell.
func writeDoorbellHeader(db []byte, spec Spec) {
	le := binary.LittleEndian
	le.PutUint32(db[0:], abi.DoorbellMagic)
	le.PutUint16(db[4:], abi.Version)
	le.PutUint32(db[8:], spec.MaxSessions)
	le.PutUint64(db[16:], spec.Epoch)
}
