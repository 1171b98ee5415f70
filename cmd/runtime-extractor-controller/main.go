// Command runtime-extractor-controller keeps the insights-runtime-extractor
// DaemonSet in its desired state. Without a subcommand it runs the controller
// against a cluster (--kubeconfig, or in-cluster config) with leader election,
// /healthz, /readyz and /metrics; --version prints the version and exits. The
// simulate and diagram subcommands work offline on the state machine.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/metrics/legacyregistry"
)

func main() {
	if err := newRootCommand(context.Background()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func newRootCommand(ctx context.Context) *cobra.Command {
	root := newControllerCommand(ctx, legacyregistry.Registerer())
	root.AddCommand(newSimulateCommand(), newDiagramCommand())
	return root
}
