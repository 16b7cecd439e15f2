package lifecycle

import "fmt"

// Code is the code field of a frame header (enum okv_frame_code in abi.h).
// A request carries one of CodeRegisterInstance..CodeMapDiscovery; its reply
// carries the same code with CodeReplyFlag set; CodeError marks an
// application error whose body is a lifecyclepb.Error.
type Code uint16

// Frame codes (abi.h enum okv_frame_code; docs/design.md §5.1).
const (
	// CodeRegisterInstance names the inference process; body RegisterInstanceRequest.
	CodeRegisterInstance Code = 1
	// CodeRegisterBuffers registers engine KV buffers; body RegisterBuffersRequest, fds attached.
	CodeRegisterBuffers Code = 2
	// CodeHealth asks for the Manager's health; body HealthRequest.
	CodeHealth Code = 3
	// CodeWatchSession subscribes to this session's state; body WatchSessionRequest.
	CodeWatchSession Code = 4
	// CodeUnregister ends the session; body UnregisterRequest.
	CodeUnregister Code = 5
	// CodeMapDiscovery asks for a namespace's discovery index; body
	// MapDiscoveryRequest, its reply carries the index's sealed memfd
	// (native/include/orbitkv/discover.h).
	CodeMapDiscovery Code = 6
	// CodeReplyFlag is ORed into a request code to form its reply code.
	CodeReplyFlag Code = 0x8000
	// CodeError marks an error frame; body lifecyclepb.Error.
	CodeError Code = 0xFFFF
)

// codeMax is the largest request code (OKV_FRAME_CODE_MAX).
const codeMax = CodeMapDiscovery

var codeNames = [...]string{
	CodeRegisterInstance: "RegisterInstance",
	CodeRegisterBuffers:  "RegisterBuffers",
	CodeHealth:           "Health",
	CodeWatchSession:     "WatchSession",
	CodeUnregister:       "Unregister",
	CodeMapDiscovery:     "MapDiscovery",
}

// Known reports whether c is a request code, the reply code of one, or
// CodeError — the only codes DecodeHeader accepts.
func (c Code) Known() bool {
	if c == CodeError {
		return true
	}
	r := c.Request()
	return r >= CodeRegisterInstance && r <= codeMax
}

// IsReply reports whether c has CodeReplyFlag set and is not CodeError.
func (c Code) IsReply() bool { return c != CodeError && c&CodeReplyFlag != 0 }

// Request returns c without CodeReplyFlag: the request code a reply answers.
// CodeError is returned unchanged.
func (c Code) Request() Code {
	if c == CodeError {
		return c
	}
	return c &^ CodeReplyFlag
}

// Reply returns the reply code of request code c (c | CodeReplyFlag).
func (c Code) Reply() Code { return c | CodeReplyFlag }

// String names the code: "Health", "Health reply", "Error", or
// "Code(0x0042)" for an unknown value.
func (c Code) String() string {
	if c == CodeError {
		return "Error"
	}
	if !c.Known() {
		return fmt.Sprintf("Code(%#04x)", uint16(c))
	}
	name := codeNames[c.Request()]
	if c.IsReply() {
		return name + " reply"
	}
	return name
}
