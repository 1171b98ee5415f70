// Command modproxy writes a file-system Go module proxy (GOPROXY=file://DIR)
// that serves one version of this module, made from a commit of this
// repository the way a public proxy makes it from a tag: the zip comes from
// golang.org/x/mod/zip's CreateFromVCS, so its h1: hash, and the go.sum lines
// a host gets, are the ones proxy.golang.org would serve for that tag.
// hack/host uses it until the module is published.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the repository's root")
	commit := flag.String("commit", "HEAD", "the commit to serve")
	path := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version to serve it as, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy's directory")
	flag.Parse()
	if *path == "" || *version == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: modproxy -module PATH -version VERSION -out DIR [-repo DIR] [-commit REV]")
		os.Exit(2)
	}
	sum, err := write(*repo, *commit, module.Version{Path: *path, Version: *version}, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s %s\n", *path, *version, sum)
}

// write makes out/<module>/@v/{list,VERSION.info,VERSION.mod,VERSION.zip}
// and returns the zip's h1: hash.
func write(repo, commit string, m module.Version, out string) (string, error) {
	if err := module.Check(m.Path, m.Version); err != nil {
		return "", err
	}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rev, err := git(repo, "rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return "", err
	}
	when, err := git(repo, "show", "-s", "--format=%cI", rev)
	if err != nil {
		return "", err
	}
	at, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return "", fmt.Errorf("commit time %q: %w", when, err)
	}
	gomod, err := git(repo, "show", rev+":go.mod")
	if err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, at.UTC()})
	if err != nil {
		return "", err
	}
	zipPath := filepath.Join(dir, m.Version+".zip")
	f, err := os.Create(zipPath)
	if err != nil {
		return "", err
	}
	if err := zip.CreateFromVCS(f, m, repo, rev, ""); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("zip %s at %s: %w", m, rev, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	for name, data := range map[string]string{
		"list":              m.Version + "\n",
		m.Version + ".info": string(info),
		m.Version + ".mod":  gomod + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return "", err
		}
	}
	return dirhash.HashZip(zipPath, dirhash.DefaultHash)
}

// git runs git in repo and returns its output without the final newline.
func git(repo string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}
