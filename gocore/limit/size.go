package limit

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// The size rule, the one for every size flag, environment variable and
// config key of the Manager and of orbitkv-bench (docs/operating.md "Sizes"):
//
//   - a plain number is bytes: 65536;
//   - binary units, in any letter case: KiB, MiB, GiB, TiB, PiB (also Ki,
//     Mi, Gi, Ti, Pi as Kubernetes writes them), 1 KiB = 1024 bytes;
//     a fraction is allowed when it comes to whole bytes (1.5GiB);
//   - B or bytes after a number is bytes (4096B);
//   - K, M, G, T, P, KB, MB, GB, TB, PB in any case are refused as
//     ambiguous: Redis and Docker read 4G and 4gb as 4 GiB, Kubernetes and
//     disk vendors as 4·10⁹ bytes, and a RAM tier 7% smaller (or larger)
//     than meant is a silent mistake. The error names the two readings and
//     the spelling to write.
//
// One space between the number and the unit is allowed ("4 GiB", as
// humanize.IBytes and the Manager's logs print sizes).
//
// SizeRule says the rule in the words of a --help text.
const SizeRule = `A size is a byte count (65536) or a number with a binary unit in any
letter case: KiB, MiB, GiB, TiB, PiB (also Ki, Mi, Gi, Ti, Pi), where
1 KiB = 1024 bytes: 64KiB, 4GiB, 1.5TiB. K, M, G, T and KB, MB, GB, TB in
any case are refused as ambiguous (Redis reads 4gb as 4 GiB, Kubernetes
reads 4G as 4,000,000,000 bytes): write 4GiB, or the byte count.`

// SizeHint is the unit rule in one line, for an error that gives its own
// examples first.
const SizeHint = "KiB = 1024 bytes; G, GB, kB and the like are refused as ambiguous"

// SizeForms is the accepted forms in one line: ParseSize's Want for every
// reason but an ambiguous unit (whose reason says what to write).
const SizeForms = "a byte count or a number with a binary unit, e.g. 65536, 64KiB, 1.5GiB; " + SizeHint

// binaryUnits are the multipliers of the unambiguous unit spellings, by
// lower-case suffix.
var binaryUnits = map[string]uint{
	"": 0, "b": 0, "bytes": 0, "byte": 0,
	"kib": 10, "ki": 10, "mib": 20, "mi": 20, "gib": 30, "gi": 30, "tib": 40, "ti": 40, "pib": 50, "pi": 50,
}

// ambiguousUnits are the spellings that read as decimal to some tools and
// as binary to others, with the exponent of each reading.
var ambiguousUnits = map[string]struct {
	binary uint // power of 2
	dec    int  // power of 10
	iec    string
}{
	"k": {10, 3, "KiB"}, "kb": {10, 3, "KiB"}, "m": {20, 6, "MiB"}, "mb": {20, 6, "MiB"},
	"g": {30, 9, "GiB"}, "gb": {30, 9, "GiB"}, "t": {40, 12, "TiB"}, "tb": {40, 12, "TiB"},
	"p": {50, 15, "PiB"}, "pb": {50, 15, "PiB"},
}

// ErrAmbiguousUnit is the reason (Error.Err) of a size whose unit reads as
// decimal to some tools and as binary to others (4G, 4GB, 64k).
var ErrAmbiguousUnit = errors.New("ambiguous unit")

// ParseSize reads text, the value of the setting field (a flag as
// "--sizes", a config key), by the size rule into a byte count. A text
// that breaks the rule comes back as an *Error with Field field, Value
// text, Err the reason (errors.Is ErrAmbiguousUnit for 4G and its kin,
// whose reason says what to write) and, for every other reason, Want
// SizeForms. ParseSize does not bound the count: 0 and 2⁶⁴-1 parse, the
// caller's limit decides.
func ParseSize(field, text string) (uint64, error) {
	n, err := parseSize(text)
	if err != nil {
		e := &Error{Field: field, Value: text, Err: err}
		if !errors.Is(err, ErrAmbiguousUnit) {
			e.Want = SizeForms
		}
		return 0, e
	}
	return n, nil
}

// parseSize reads s by the size rule. The error says why s is refused and
// how to write what was meant; it does not name the setting.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimPrefix(t[i:], " ")
	if num == "" || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
		return 0, errors.New("not a size")
	}
	lower := strings.ToLower(unit)
	if a, ok := ambiguousUnits[lower]; ok {
		return 0, fmt.Errorf("%w %q: %s%s could mean %s bytes (binary, as Redis reads it) or %s bytes (decimal); write %s%s, or the byte count",
			ErrAmbiguousUnit, unit, num, unit, exact(num, big.NewInt(0).Lsh(big.NewInt(1), a.binary)), exact(num, big.NewInt(0).Exp(big.NewInt(10), big.NewInt(int64(a.dec)), nil)), num, a.iec)
	}
	shift, ok := binaryUnits[lower]
	if !ok {
		return 0, fmt.Errorf("not a size: unknown unit %q", unit)
	}
	whole, frac, _ := strings.Cut(num, ".")
	// n = (whole·10^len(frac) + frac) · 2^shift / 10^len(frac), exactly.
	scale := big.NewInt(0).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	n, _ := big.NewInt(0).SetString(whole+frac, 10)
	n.Lsh(n, shift)
	q, r := big.NewInt(0).QuoRem(n, scale, big.NewInt(0))
	switch {
	case r.Sign() != 0:
		return 0, fmt.Errorf("not a whole number of bytes (%s%s is %s bytes)", num, unit, ratString(n, scale))
	case !q.IsUint64():
		return 0, fmt.Errorf("too large (at most %d bytes)", uint64(1<<64-1))
	}
	return q.Uint64(), nil
}

// exact formats num × mult as a whole number of bytes, or with its
// fraction when it is not one.
func exact(num string, mult *big.Int) string {
	whole, frac, _ := strings.Cut(num, ".")
	scale := big.NewInt(0).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	n, _ := big.NewInt(0).SetString(whole+frac, 10)
	return ratString(n.Mul(n, mult), scale)
}

// ratString formats n/d as an integer when d divides n, else with up to
// three decimals.
func ratString(n, d *big.Int) string {
	r := big.NewRat(1, 1).SetFrac(n, d)
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(3)
}

// AtMost is "at most N would be accepted" for a room of n bytes: n rounded
// down to whole TiB from 16 TiB, else to whole GiB, MiB or KiB, written as a
// size the Manager's flags take ("18GiB"), so the value named is itself
// accepted; "nothing would be accepted" below 1 KiB.
func AtMost(n uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n>>u.shift >= 16 || (u.shift < 40 && n>>u.shift > 0) {
			return fmt.Sprintf("at most %d%s would be accepted", n>>u.shift, u.name)
		}
	}
	return "nothing would be accepted"
}
