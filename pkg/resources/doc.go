// Package resources owns the runtime extractor's DaemonSet: what it should
// look like (DesiredDaemonSet, from an embedded manifest completed with the
// images, the target version, the cluster TLS profile and the scheduling
// settings of config.yaml) and how it gets there (Manager, which applies it
// with library-go's resourceapply and deletes it).
//
// The Manager reads the DaemonSet from an informer lister and passes
// ApplyDaemonSet the generation of its own last write, so an apply that has
// nothing to change sends no API request. The shared names of the
// controller (namespace, labels, annotations, field manager) live in
// names.go.
package resources
