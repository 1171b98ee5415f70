// Command localcluster runs the local test cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok fake nodes, with the OpenShift
// objects the controller expects) until Ctrl-C, or for as long as a command runs:
//
//	go run ./hack/localcluster [--nodes 3] [--dir D] [-- command args...]
//
// The command runs in the foreground with KUBECONFIG set; a literal {kubeconfig}
// in its arguments is replaced by the kubeconfig path. On Ctrl-C, SIGTERM or the
// command's exit, everything started here is stopped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// kubeconfigToken in the command's arguments is replaced by the kubeconfig path.
const kubeconfigToken = "{kubeconfig}"

// commandGrace is how long the command gets to exit after a signal before the
// next, harder one.
const commandGrace = 10 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("localcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", testcluster.DefaultNodes, "number of kwok fake nodes")
	dir := fs.String("dir", "", "directory for certificates, kubeconfig, etcd data and logs (default: a temporary directory, removed on exit)")
	binDir := fs.String("bin-dir", "", "directory with the cluster binaries (default: bin/ of this module)")
	version := fs.String("version", testcluster.DefaultVersion, "OpenShift version recorded in the ClusterVersion")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: localcluster [flags] [-- command args...]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	command := fs.Args()

	// Signals are caught before the cluster starts, so that Ctrl-C during start-up
	// still stops whatever was already running.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startDone := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(stderr, "localcluster: %s during start-up, stopping\n", sig)
			cancel()
		case <-startDone:
		}
	}()
	cluster, err := testcluster.Start(ctx, testcluster.Options{
		Nodes: *nodes, Dir: *dir, BinDir: *binDir, Version: *version, Log: stderr,
	})
	close(startDone)
	if err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		if errors.Is(err, testcluster.ErrBinariesMissing) {
			fmt.Fprintln(stderr, "localcluster: build them with `make tools`")
		}
		return 1
	}
	printWelcome(stdout, cluster, *version)

	code := 0
	if len(command) == 0 {
		fmt.Fprintln(stdout, "Press Ctrl-C to stop the cluster.")
		sig := <-signals
		fmt.Fprintf(stderr, "localcluster: %s, stopping\n", sig)
	} else {
		code = runCommand(command, cluster.Kubeconfig, signals, stderr)
	}

	fmt.Fprintln(stderr, "localcluster: stopping the cluster")
	if err := cluster.Stop(); err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func printWelcome(w io.Writer, c *testcluster.Cluster, version string) {
	kc := c.Kubeconfig
	fmt.Fprintf(w, `
Local cluster ready in %s: %d kwok nodes (%s), OpenShift %s.
  kubeconfig: %s
  logs:       %s/*.log

Things to try (kubectl is optional; any Kubernetes client works with the kubeconfig):
  export KUBECONFIG=%s
  kubectl -n openshift-insights get daemonset,pods -o wide
  # delete the DaemonSet; the controller restores it
  kubectl delete daemonset -n openshift-insights insights-runtime-extractor
  # disable the runtime extractor in the config (kubectl edit configmap -n openshift-insights insights-config works too)
  kubectl -n openshift-insights create configmap insights-config --from-literal=config.yaml='dataReporting: {disableRuntimeExtractor: true}' --dry-run=client -o yaml | kubectl apply -f -
  # bump the cluster version; the controller upgrades the DaemonSet
  kubectl patch clusterversion version --subresource=status --type=merge -p '{"status":{"desired":{"version":"%s"}}}'

`, c.StartupDuration.Round(100*time.Millisecond), len(c.Nodes), strings.Join(c.Nodes, ", "), version, kc, c.Dir, kc, nextPatch(version))
}

// nextPatch turns "4.22.0" into "4.22.1", for the example upgrade.
func nextPatch(version string) string {
	i := strings.LastIndex(version, ".")
	if i < 0 {
		return version + ".1"
	}
	var n int
	if _, err := fmt.Sscanf(version[i+1:], "%d", &n); err != nil {
		return version + ".1"
	}
	return fmt.Sprintf("%s.%d", version[:i], n+1)
}

// runCommand runs the command in the foreground with KUBECONFIG set, until it
// exits or a signal asks to stop; it returns the exit code to report.
//
// The command stays in this process group, so a terminal's Ctrl-C reaches it
// directly; on SIGINT it therefore gets a grace period before SIGTERM, so that it
// is not interrupted twice (library-go's controllers exit hard on a second
// signal). SIGTERM is forwarded at once. If this process dies, Pdeathsig sends
// the command SIGTERM.
func runCommand(argv []string, kubeconfig string, signals <-chan os.Signal, stderr io.Writer) int {
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = strings.ReplaceAll(a, kubeconfigToken, kubeconfig)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "localcluster: start %s: %v\n", args[0], err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var escalate <-chan time.Time
	var next os.Signal // the signal sent when escalate fires
	for {
		select {
		case err := <-exited:
			return exitCode(err, escalate != nil, stderr)
		case sig := <-signals:
			switch {
			case escalate == nil && sig == syscall.SIGINT:
				fmt.Fprintf(stderr, "localcluster: interrupt, waiting for %s to exit\n", args[0])
				next = syscall.SIGTERM
			case escalate == nil:
				fmt.Fprintf(stderr, "localcluster: %s, forwarding to %s\n", sig, args[0])
				_ = cmd.Process.Signal(syscall.SIGTERM)
				next = syscall.SIGKILL
			default: // a second signal: no more patience
				_ = cmd.Process.Kill()
				next = syscall.SIGKILL
			}
			escalate = time.After(commandGrace)
		case <-escalate:
			fmt.Fprintf(stderr, "localcluster: %s still running, sending %s\n", args[0], next)
			_ = cmd.Process.Signal(next)
			next = syscall.SIGKILL
			escalate = time.After(commandGrace)
		}
	}
}

// exitCode maps the command's end to this program's exit code: its own code when
// it ended by itself, 0 when it ended because it was asked to.
func exitCode(err error, asked bool, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if asked {
			return 0
		}
		fmt.Fprintf(stderr, "localcluster: command exited: %v\n", err)
		if code := exitErr.ExitCode(); code > 0 {
			return code
		}
		return 1
	}
	fmt.Fprintf(stderr, "localcluster: command: %v\n", err)
	return 1
}
