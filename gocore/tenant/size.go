package tenant

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// parseSize reads a ram= or ssd= quota by the Manager's size rule
// (gocore/limit's ParseSize, which this package does not import: it stays
// on the standard library): a byte count, or a number with a binary unit
// in any letter case (KiB, MiB, GiB, TiB, PiB, or Ki..Pi; B or bytes for
// bytes), one space allowed before the unit, a fraction allowed when it
// comes to whole bytes; K, KB, M, MB, G, GB, T, TB, P, PB are refused as
// ambiguous. The error says why, not which setting.
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
	var shift uint
	switch lower {
	case "", "b", "byte", "bytes":
	case "kib", "ki":
		shift = 10
	case "mib", "mi":
		shift = 20
	case "gib", "gi":
		shift = 30
	case "tib", "ti":
		shift = 40
	case "pib", "pi":
		shift = 50
	case "k", "kb", "m", "mb", "g", "gb", "t", "tb", "p", "pb":
		return 0, fmt.Errorf("ambiguous unit %q (binary or decimal?): write %siB, or the byte count", unit, strings.ToUpper(lower[:1]))
	default:
		return 0, fmt.Errorf("not a size: unknown unit %q", unit)
	}
	whole, frac, _ := strings.Cut(num, ".")
	if len(frac) > 18 {
		return 0, errors.New("not a size: more than 18 decimals")
	}
	tooLarge := fmt.Errorf("too large (at most %d bytes)", uint64(1<<64-1))
	// n = (whole·10^len(frac) + frac) · 2^shift / 10^len(frac), exactly:
	// a 128-bit product, then one division.
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		return 0, tooLarge
	}
	scale := uint64(1)
	for range len(frac) {
		scale *= 10
	}
	var f uint64
	if frac != "" {
		f, _ = strconv.ParseUint(frac, 10, 64)
	}
	hi, lo := bits.Mul64(w, scale)
	lo, c := bits.Add64(lo, f, 0)
	hi += c
	if shift > 0 {
		if hi>>(64-shift) != 0 {
			return 0, tooLarge
		}
		hi, lo = hi<<shift|lo>>(64-shift), lo<<shift
	}
	if hi >= scale {
		return 0, tooLarge
	}
	q, r := bits.Div64(hi, lo, scale)
	if r != 0 {
		return 0, fmt.Errorf("not a whole number of bytes (%s%s)", num, unit)
	}
	return q, nil
}
