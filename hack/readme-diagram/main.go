// Command readme-diagram refreshes the state diagram in README.md: it reads the
// Mermaid source on standard input (`runtime-extractor-controller diagram
// --format mermaid`) and writes it, fenced, between the README's marker
// comments. `make docs` runs it; a test fails when the README is stale.
//
//	runtime-extractor-controller diagram --format mermaid | readme-diagram README.md
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// The marker comments around the generated block.
const (
	beginMarker = "<!-- state-diagram:begin -->"
	endMarker   = "<!-- state-diagram:end -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: readme-diagram README.md < mermaid-source")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "readme-diagram:", err)
		os.Exit(1)
	}
}

func run(path string, diagram io.Reader) error {
	source, err := io.ReadAll(diagram)
	if err != nil {
		return fmt.Errorf("read diagram: %w", err)
	}
	if len(bytes.TrimSpace(source)) == 0 {
		return errors.New("empty diagram on standard input")
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	updated, err := replaceBlock(doc, source)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(updated, doc) {
		return nil
	}
	if err := os.WriteFile(path, updated, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fence wraps Mermaid source in a fenced code block.
func fence(source []byte) []byte {
	source = bytes.TrimRight(source, "\n")
	return []byte("```mermaid\n" + string(source) + "\n```\n")
}

// replaceBlock returns doc with everything between the markers replaced by the
// fenced source; the markers stay.
func replaceBlock(doc, source []byte) ([]byte, error) {
	start, end, err := blockBounds(doc)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(doc[:start])
	out.Write(fence(source))
	out.Write(doc[end:])
	return out.Bytes(), nil
}

// currentBlock returns what sits between the markers now.
func currentBlock(doc []byte) ([]byte, error) {
	start, end, err := blockBounds(doc)
	if err != nil {
		return nil, err
	}
	return doc[start:end], nil
}

// blockBounds locates the content between the markers: it starts on the line
// after the begin marker and ends where the end marker's line starts.
func blockBounds(doc []byte) (start, end int, err error) {
	b := bytes.Index(doc, []byte(beginMarker))
	e := bytes.Index(doc, []byte(endMarker))
	switch {
	case b < 0 || e < 0:
		return 0, 0, fmt.Errorf("markers %s and %s not found", beginMarker, endMarker)
	case bytes.Count(doc, []byte(beginMarker)) != 1 || bytes.Count(doc, []byte(endMarker)) != 1:
		return 0, 0, errors.New("each marker must appear exactly once")
	case e < b:
		return 0, 0, errors.New("end marker before begin marker")
	}
	nl := bytes.IndexByte(doc[b:], '\n')
	if nl < 0 || b+nl+1 > e {
		return 0, 0, errors.New("begin marker must end its line")
	}
	start = b + nl + 1
	end = bytes.LastIndexByte(doc[:e], '\n') + 1
	if end < start {
		return 0, 0, errors.New("end marker must start its own line")
	}
	return start, end, nil
}
