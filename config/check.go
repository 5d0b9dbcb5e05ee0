package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckEnvironment checks what a valid configuration still needs from the
// machine it starts on, every problem at once (errors.Join), one line each:
//   - every upstream's api_key_env names a variable that is set (start-up
//     refuses an upstream whose key is missing);
//   - the keys of the backends in use (the embeddings endpoint, Qdrant, the
//     rerank judge) name variables that are set, when they name one;
//   - cache.data_dir and, for the embedded index, vector.path are folders
//     this process can write (or can create).
//
// It creates nothing that is not there and removes the probe file it
// writes. `breakwater -check` and start-up both run it after Load.
func (c *Config) CheckEnvironment(env func(string) string) error {
	if env == nil {
		env = os.Getenv
	}
	var errs []error
	unset := func(key, name, why string) {
		if name != "" && env(name) == "" {
			errs = append(errs, fmt.Errorf("config: %s = %q: the variable is not set (%s)", key, name, why))
		}
	}
	for i, u := range c.Upstreams {
		unset(fmt.Sprintf("upstreams[%d].api_key_env", i), u.APIKeyEnv,
			fmt.Sprintf("upstream %q sends this key; export it, or remove api_key_env to forward the client's own key", u.Name))
	}
	if c.Embed.Provider == ProviderOpenAI {
		unset("embed.openai.api_key_env", c.Embed.OpenAI.APIKeyEnv, "the embeddings endpoint's key; remove the key for a local server that needs none")
	}
	if c.Vector.Backend == BackendQdrant {
		unset("vector.qdrant.api_key_env", c.Vector.Qdrant.APIKeyEnv, "Qdrant's key; remove the key for a Qdrant without one")
	}
	if c.Cache.Verify.Judge == JudgeRerank {
		unset("cache.verify.api_key_env", c.Cache.Verify.APIKeyEnv, "the reranker's key")
	}
	if c.Cache.DataDir != "" {
		if err := writableDir(c.Cache.DataDir); err != nil {
			errs = append(errs, fmt.Errorf("config: cache.data_dir = %q: %v (the partition secret and the embedded index live here)", c.Cache.DataDir, err))
		}
	}
	if c.Vector.Backend == BackendEmbedded && c.Vector.Path != "" && c.Vector.Path != filepath.Join(c.Cache.DataDir, defaultVectorsDirectory) {
		if err := writableDir(c.Vector.Path); err != nil {
			errs = append(errs, fmt.Errorf("config: vector.path = %q: %v", c.Vector.Path, err))
		}
	}
	return errors.Join(errs...)
}

// writableDir reports why dir cannot be used as a folder this process
// writes: the folder, or when it does not exist yet its nearest existing
// ancestor (where start-up would create it), must take a new file.
func writableDir(dir string) error {
	at := dir
	for {
		fi, err := os.Stat(at)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a folder", at)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		parent := filepath.Dir(at)
		if parent == at {
			return fmt.Errorf("no existing folder above it")
		}
		at = parent
	}
	f, err := os.CreateTemp(at, ".breakwater-check-*")
	if err != nil {
		if at != dir {
			return fmt.Errorf("cannot be created: %s is not writable", at)
		}
		return fmt.Errorf("not writable: %v", errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
