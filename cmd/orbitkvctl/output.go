package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonOut is how every command prints JSON: field names as in the .proto,
// zero values included, 64-bit integers as strings (protojson).
var jsonOut = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// Output formats of --output.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// printAs writes m in format: JSON or YAML; table (or any other) through
// table.
func printAs(w io.Writer, format string, m proto.Message, table func(io.Writer) error) error {
	switch format {
	case formatJSON:
		return printJSON(w, m)
	case formatYAML:
		return printYAML(w, m)
	}
	return table(w)
}

// printYAML writes m as one YAML document made from its JSON (jsonOut):
// the same field names, the same order, 64-bit integers as strings, so
// the YAML parses back to the values the JSON carries. Strings that would
// read as another type (a number as a string, "true") are quoted.
//
// A string holding a rune that is not printable (a server's string may)
// is written as the table writes it (printable: Go escapes such as
// \u202e), so no control, bidi or other invisible character reaches the
// terminal; YAML's own escapes would keep some of them (it deems U+202E
// printable).
func printYAML(w io.Writer, m proto.Message) error {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(safeJSON(b, true), &doc); err != nil { // JSON is YAML
		return err
	}
	blockStyle(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = w.Write(out.Bytes())
	return err
}

// blockStyle clears the flow and quoting styles the JSON gave n and its
// children, so the encoder writes block style and quotes only what needs
// it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode {
		n.Value = printable(n.Value)
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// printJSON writes m as one indented JSON document. protojson varies its
// whitespace on purpose; json.Indent makes it the same on every run.
// Every rune that is not printable is written as a JSON escape (safeJSON):
// the values are the server's, the bytes carry nothing a terminal acts on.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, safeJSON(b, false), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// safeJSON is the JSON document b with every rune that is neither
// printable (unicode.IsPrint) nor JSON whitespace written as an escape:
// \uXXXX, and above U+FFFF a UTF-16 pair (JSON) or \UXXXXXXXX (asYAML:
// YAML reads JSON but takes no surrogate pairs). Outside its strings a
// JSON document holds only ASCII punctuation, digits, letters and
// whitespace, so each such rune is inside a string, and the escape keeps
// its value.
func safeJSON(b []byte, asYAML bool) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == '\n' || r == '\t' || r == '\r' || (unicode.IsPrint(r) && r != utf8.RuneError):
			out = append(out, b[i:i+n]...)
		case r > 0xFFFF && asYAML:
			out = fmt.Appendf(out, "\\U%08x", r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", r1, r2)
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
		i += n
	}
	return out
}

// table is a tab-aligned text table.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(anySlice(header)...)
	}
	return t
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// row writes one row. Every cell goes through printable: the cells carry
// strings the server sent (a status, a tenant, an instance name), which
// must not reach the terminal as escape sequences nor break the table with
// a tab or a newline.
func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, printable(fmt.Sprint(c)))
	}
	fmt.Fprintln(t.tw)
}

// printable is s with every rune that is not printable (unicode.IsPrint:
// control characters such as ESC, tab and newline, C1 controls, format
// characters such as bidi overrides, non-ASCII spaces) and every byte that
// is not UTF-8 written as Go escapes the way strconv.Quote writes them
// (\x1b, \t, \u202e, \xff); s itself when it holds none.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || !unicode.IsPrint(r) {
			q := strconv.Quote(s[i : i+n])
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func (t *table) flush() error { return t.tw.Flush() }

func ibytes(n uint64) string { return humanize.IBytes(n) }

func dur(ns uint64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return d.Round(time.Second).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

func pct(r float64) string { return fmt.Sprintf("%.1f%%", 100*r) }
