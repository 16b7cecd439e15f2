package ssd

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
)

// keyName is the file under Spec.Dir that holds the store's secret: the
// key of the MAC over every slot header, block and index record
// (layout.MAC). It is exactly layout.SecretBytes (32) random bytes and
// nothing else.
const keyName = "mac.key"

// loadSecret reads the store's secret from dir/mac.key, or makes one when
// the file does not exist (made is then true). An existing file gets the
// checks of the tier's other files (checkOwnFile: opened without
// following a link, a regular file of the Manager's uid, no bits for
// group or others, one link) and must be exactly SecretBytes long; any
// other file is refused with an error naming its path and what is wrong.
// A new secret comes from crypto/rand and reaches the file through
// mac.key.tmp (created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, written,
// fsynced, renamed, the directory fsynced), so a crash leaves either no
// key or a whole one. The caller holds the data file's flock, so no other
// store makes a key in dir meanwhile.
func loadSecret(dir string) (secret [layout.SecretBytes]byte, made bool, err error) {
	path := filepath.Join(dir, keyName)
	// A creation that crashed before its rename leaves its temporary file.
	if err := os.Remove(path + tmpSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return secret, false, fmt.Errorf("ssd tier: removing %s: %w", path+tmpSuffix, err)
	}
	f, err := openOwnFile(path, os.O_RDONLY)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := rand.Read(secret[:]); err != nil {
			return secret, false, fmt.Errorf("ssd tier: drawing the MAC key: %w", err)
		}
		f, err := writeFileSync(path, secret[:])
		if err != nil {
			return secret, false, fmt.Errorf("ssd tier: creating the MAC key: %w", err)
		}
		f.Close()
		return secret, true, nil
	case err != nil:
		return secret, false, fmt.Errorf("ssd tier: the MAC key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return secret, false, fmt.Errorf("ssd tier: stat %s: %w", path, err)
	}
	if fi.Size() != layout.SecretBytes {
		return secret, false, fmt.Errorf("ssd tier: %s is %d bytes, want exactly %d: not a key this tier made; remove it (the tier then starts empty under a new key)",
			path, fi.Size(), layout.SecretBytes)
	}
	if _, err := io.ReadFull(f, secret[:]); err != nil {
		return secret, false, fmt.Errorf("ssd tier: reading %s: %w", path, err)
	}
	return secret, false, nil
}
