package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/policy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestStrictMakesAnInvalidRunExitThree(t *testing.T) {
	invalid := &policy.PolicyReport{Head: suite.Head{Validity: suite.Judge(suite.ValidityInput{Repeats: 1})}}
	valid := &policy.PolicyReport{Head: suite.Head{Validity: suite.Judge(suite.ValidityInput{Repeats: 3})}}
	table := func(w io.Writer) error { return nil }
	tests := []struct {
		name   string
		strict bool
		rep    *policy.PolicyReport
		exit   int
	}{
		{"an invalid run without --strict exits 0", false, invalid, 0},
		{"an invalid run with --strict exits 3", true, invalid, suite.ExitInvalid},
		{"a valid run with --strict exits 0", true, valid, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := (&suite.Common{Strict: tt.strict}).Emit(&out, io.Discard, tt.rep, table)
			exit := 0
			if errors.As(err, new(*suite.InvalidRunError)) {
				exit = suite.ExitInvalid
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tt.exit {
				t.Errorf("exit %d (err %v), want %d", exit, err, tt.exit)
			}
			if strings.Contains(out.String(), "run: INVALID") != !tt.rep.Validity.Valid {
				t.Errorf("table = %q: want the verdict printed", out.String())
			}
		})
	}
	t.Run("dispatch maps the error to exit status 3", func(t *testing.T) {
		var stderr bytes.Buffer
		code := dispatch([]string{"policy", "--strict", "--repeats", "1", "--limit", "50", "--fractions", "0.5", "--trace", benchtest.TestTrace}, io.Discard, &stderr)
		if code != suite.ExitInvalid || !strings.Contains(stderr.String(), "--repeats 1") {
			t.Errorf("exit %d, stderr %q; want %d naming --repeats 1", code, stderr.String(), suite.ExitInvalid)
		}
	})
}
