// Package resources owns the runtime extractor's DaemonSet: its desired state
// (DesiredDaemonSet) and the writes that get it there (Manager).
package resources
