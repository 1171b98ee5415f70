package testcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// auditPolicy records every request at Metadata level: who, which verb, which
// object, the response code; never a body. RequestReceived is left out, as
// every request also has a later stage: ResponseStarted (long-running
// requests, i.e. watches, as they start) or ResponseComplete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`

const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
	// auditLogMaxSizeMB keeps the log in one file: lumberjack would rotate at
	// its 100 MB default, and a reader of the one path would miss requests.
	auditLogMaxSizeMB = 4096
)

// AuditLogPath is where kube-apiserver writes the audit log; empty unless the
// cluster was started with Options.AuditLog.
func (c *Cluster) AuditLogPath() string {
	if !c.opts.AuditLog {
		return ""
	}
	return filepath.Join(c.Dir, auditLogFile)
}

// auditArgs writes the policy and returns kube-apiserver's audit flags.
func (c *Cluster) auditArgs() ([]string, error) {
	policy := filepath.Join(c.Dir, auditPolicyFile)
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, fmt.Errorf("write audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + filepath.Join(c.Dir, auditLogFile),
		"--audit-log-format=json",
		fmt.Sprintf("--audit-log-maxsize=%d", auditLogMaxSizeMB),
		// The default mode: each event is written before the request completes.
		"--audit-log-mode=blocking",
	}, nil
}

// AuditEvent is one API request as the audit log records it.
type AuditEvent struct {
	// ID is the request's audit ID; every stage of one request shares it.
	ID string
	// User is the authenticated user name, e.g.
	// "system:serviceaccount:openshift-insights:runtime-extractor-controller".
	User string
	// Verb is the API verb: get, list, watch, create, update, patch, delete,
	// deletecollection (or an HTTP method for non-resource URLs).
	Verb string
	// Resource, Subresource, Namespace, Name and APIGroup identify the object;
	// empty for non-resource requests such as discovery.
	Resource, Subresource, Namespace, Name, APIGroup string
	// RequestURI is the request's path and query.
	RequestURI string
	// UserAgent is the client's User-Agent header.
	UserAgent string
	// Code is the HTTP response code; 0 while a watch is still open.
	Code int
	// Received is when the API server received the request.
	Received time.Time
}

// writeVerbs are the verbs that change state.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// IsWrite reports whether the request changed (or tried to change) state.
func (e AuditEvent) IsWrite() bool { return writeVerbs[e.Verb] }

// auditLine is the part of an audit.k8s.io/v1 Event this package reads.
type auditLine struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

func (l auditLine) event() AuditEvent {
	e := AuditEvent{
		ID: l.AuditID, User: l.User.Username, Verb: l.Verb,
		RequestURI: l.RequestURI, UserAgent: l.UserAgent, Received: l.RequestReceivedTimestamp,
	}
	if r := l.ObjectRef; r != nil {
		e.Resource, e.Subresource, e.Namespace, e.Name, e.APIGroup = r.Resource, r.Subresource, r.Namespace, r.Name, r.APIGroup
	}
	if l.ResponseStatus != nil {
		e.Code = l.ResponseStatus.Code
	}
	return e
}

// ReadAuditLog parses a whole audit log: one AuditEvent per request, in the
// order the log first mentions each.
func ReadAuditLog(path string) ([]AuditEvent, error) {
	r := NewAuditReader(path)
	return r.Next()
}

// AuditReader reads an audit log incrementally, as kube-apiserver appends to
// it. Each request is returned once, from the first of its stages read; a
// line still being written is kept for the next call. Safe for concurrent use.
type AuditReader struct {
	path string

	mu      sync.Mutex
	offset  int64
	partial []byte
	seen    map[string]bool
	// skipLine drops the bytes up to the next newline: the reader started
	// in the middle of a line (NewAuditReaderAtEnd).
	skipLine bool
}

// NewAuditReader returns a reader positioned at the start of the log at path.
func NewAuditReader(path string) *AuditReader {
	return &AuditReader{path: path, seen: map[string]bool{}}
}

// NewAuditReaderAtEnd returns a reader that skips what the log at path holds
// now, so that a long-running cluster's history is not parsed again: its first
// Next returns the requests logged after this call. A line still being written
// when it is called is skipped whole. A request that started before the call
// and completes after it (a watch) is returned from its later stage.
func NewAuditReaderAtEnd(path string) (*AuditReader, error) {
	r := NewAuditReader(path)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("seek audit log: %w", err)
	}
	if size == 0 {
		return r, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	r.offset, r.skipLine = size, last[0] != '\n'
	return r, nil
}

// Next returns the requests logged since the previous call. A log that does
// not exist yet reads as empty.
func (r *AuditReader) Next() ([]AuditEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.Open(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek audit log: %w", err)
	}
	data, err := io.ReadAll(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	r.offset += int64(len(data))
	data = append(r.partial, data...)
	r.partial = nil
	if r.skipLine {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return nil, nil // still inside the line that was being written
		}
		data, r.skipLine = data[nl+1:], false
	}

	var out []AuditEvent
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			r.partial = append([]byte(nil), data...) // written up to here so far
			break
		}
		line := bytes.TrimSpace(data[:nl])
		data = data[nl+1:]
		if len(line) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return out, fmt.Errorf("parse audit log line %.120q: %w", line, err)
		}
		if l.AuditID == "" || r.seen[l.AuditID] {
			continue
		}
		r.seen[l.AuditID] = true
		out = append(out, l.event())
	}
	return out, nil
}

// CountByUserAndVerb counts requests per user and verb:
// counts[user][verb].
func CountByUserAndVerb(events []AuditEvent) map[string]map[string]int {
	counts := map[string]map[string]int{}
	for _, e := range events {
		if counts[e.User] == nil {
			counts[e.User] = map[string]int{}
		}
		counts[e.User][e.Verb]++
	}
	return counts
}
