// Package testwait says how long a unit test waits for something that should
// happen promptly (an informer's event, a signal, a goroutine's return).
//
// CI runs the unit packages, and the race detector over them, under nice
// beside the end-to-end suite, whose clusters take the cores first; a waiting
// test may then get a sliver of a core for minutes. A passing test never
// waits this long, so the figure only bounds how long a failing one takes to
// say so. It is no timer of the controller: those run at their defaults.
package testwait

import "time"

// Patience is the longest a unit test polls or selects for an outcome before
// it fails.
const Patience = 2 * time.Minute
