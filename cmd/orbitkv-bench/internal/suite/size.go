package suite

import (
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/spf13/pflag"
)

// sizeValue is a pflag.Value for a byte count written by the size rule
// of every OrbitKV size setting (limit.ParseSize: 65536, 64KiB, 4GiB;
// 4G and 4GB are refused as ambiguous). A refused value is kept in *err,
// the *limit.Error naming the flag, so that ParseArgs reports it as the
// Manager does instead of through pflag's "invalid argument" wrapper.
type sizeValue struct {
	n    *uint64
	name string
	err  *error
}

// String writes the count in the largest binary unit that divides it.
func (s sizeValue) String() string {
	if s.n == nil {
		return ""
	}
	return limit.Size(*s.n)
}

// Type names the value in --help.
func (s sizeValue) Type() string { return "size" }

// Set parses v by the size rule.
func (s sizeValue) Set(v string) error {
	n, err := limit.ParseSize("--"+s.name, v)
	if err != nil {
		*s.err = err
		return err
	}
	*s.n = n
	return nil
}

// SizeVar adds the size flag --name into p, whose value is its default;
// usage should name the value `size` (help's value type).
func (f *Flags) SizeVar(p *uint64, name, usage string) {
	f.Var(sizeValue{n: p, name: name, err: &f.sizeErr}, name, usage)
}

var _ pflag.Value = sizeValue{}

// ParseSize is limit.ParseSize of the value of --name as a usage error.
func ParseSize(name, v string) (uint64, error) {
	n, err := limit.ParseSize("--"+name, v)
	if err != nil {
		return 0, Usagef("%v", err)
	}
	return n, nil
}
