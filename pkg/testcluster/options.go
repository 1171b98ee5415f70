package testcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Defaults applied by Start when an Options field is zero.
const (
	DefaultNodes   = 3
	DefaultVersion = "4.22.0"
)

// Tool names expected in the bin directory (built by `make tools`).
const (
	binEtcd          = "etcd"
	binAPIServer     = "kube-apiserver"
	binControllerMgr = "kube-controller-manager"
	binScheduler     = "kube-scheduler"
	binKwok          = "kwok"
	kwokStagesFile   = "kwok-stages.yaml"
)

var requiredTools = []string{binEtcd, binAPIServer, binControllerMgr, binScheduler, binKwok, kwokStagesFile}

// ErrBinariesMissing is returned (wrapped) when a tool binary is not in the bin
// directory; `make tools` builds them.
var ErrBinariesMissing = errors.New("local cluster binaries missing: run `make tools`")

// Options configure Start. The zero value is usable.
type Options struct {
	// Nodes is the number of kwok fake Linux nodes; 0 means DefaultNodes.
	Nodes int
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
	// kwok and kwok-stages.yaml. Empty means the bin/ directory beside the go.mod
	// found by walking up from the working directory.
	BinDir string
	// Dir receives certificates, kubeconfigs, etcd data and process logs. Empty
	// means a new temporary directory, removed by Stop.
	Dir string
	// Log receives progress lines (what started, how long it took). Process output
	// goes to <Dir>/<component>.log and is tailed into errors. Nil discards.
	Log io.Writer
	// Version is the OpenShift release recorded in the ClusterVersion's
	// status.desired.version; empty means DefaultVersion.
	Version string
	// AuditLog makes kube-apiserver write an audit log of every request (JSON
	// lines, Metadata level) to Cluster.AuditLogPath, so tests and benchmarks
	// can count the requests of one client (ReadAuditLog, CountByUserAndVerb).
	AuditLog bool
	// ControlPlaneQPS is the client QPS of kube-controller-manager and
	// kube-scheduler (burst: twice as much); 0 keeps their defaults (20 and
	// 50). At hundreds of nodes the defaults, not the machine, bound how fast
	// the DaemonSet controller creates and deletes pods; production control
	// planes raise them too.
	ControlPlaneQPS float32
}

func (o Options) withDefaults() (Options, error) {
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Nodes < 0 {
		return o, fmt.Errorf("nodes must be positive, got %d", o.Nodes)
	}
	if o.ControlPlaneQPS < 0 {
		return o, fmt.Errorf("control plane QPS must not be negative, got %g", o.ControlPlaneQPS)
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.BinDir == "" {
		root, err := ModuleRoot()
		if err != nil {
			return o, fmt.Errorf("locate bin dir: %w", err)
		}
		o.BinDir = filepath.Join(root, "bin")
	}
	abs, err := filepath.Abs(o.BinDir)
	if err != nil {
		return o, fmt.Errorf("resolve bin dir: %w", err)
	}
	o.BinDir = abs
	return o, nil
}

// CheckBinaries reports, wrapping ErrBinariesMissing, which tools are absent from
// binDir (empty binDir: the module's bin/).
func CheckBinaries(binDir string) error {
	o, err := Options{BinDir: binDir}.withDefaults()
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range requiredTools {
		if _, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (missing in %s: %s)", ErrBinariesMissing, o.BinDir, strings.Join(missing, ", "))
	}
	return nil
}

// ModuleRoot walks up from the working directory to the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working dir: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}
