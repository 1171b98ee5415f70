package main

import (
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"
)

// A changed signature is a removed line and an added one: the check reports
// it as incompatible. A new declaration alone is compatible.
func TestDifferenceTellsBreakingFromNew(t *testing.T) {
	recorded := []string{"pkg a, func F(x int)", "pkg a, func G()"}
	current := []string{"pkg a, func F(x int64)", "pkg a, func G()", "pkg a, func H()"}
	removed, added := difference(recorded, current)
	if !slices.Equal(removed, []string{"pkg a, func F(x int)"}) || !slices.Equal(added, []string{"pkg a, func F(x int64)", "pkg a, func H()"}) {
		t.Fatalf("removed %v, added %v", removed, added)
	}
	var b strings.Builder
	report(&b, removed, added)
	if !strings.Contains(b.String(), "incompatible API change: 1 recorded") {
		t.Errorf("report does not call the change incompatible:\n%s", b.String())
	}
	if removed, _ := difference(recorded, append(slices.Clone(recorded), "pkg a, func H()")); len(removed) != 0 {
		t.Errorf("an addition reported as a removal: %v", removed)
	}
}

// A struct's unexported fields are not API; its exported ones are, and a
// "..." says there are others.
func TestDescribeListsExportedFieldsAndMethods(t *testing.T) {
	pkg := types.NewPackage("github.com/insights-runtime-extractor/controller/pkg/x", "x")
	fields := []*types.Var{
		types.NewField(token.NoPos, pkg, "Name", types.Typ[types.String], false),
		types.NewField(token.NoPos, pkg, "secret", types.Typ[types.Int], false),
	}
	obj := types.NewTypeName(token.NoPos, pkg, "T", nil)
	named := types.NewNamed(obj, types.NewStruct(fields, nil), nil)
	sig := types.NewSignatureType(types.NewVar(token.NoPos, pkg, "t", types.NewPointer(named)), nil, nil, nil,
		types.NewTuple(types.NewVar(token.NoPos, pkg, "", types.Typ[types.Bool])), false)
	named.AddMethod(types.NewFunc(token.NoPos, pkg, "Ready", sig))
	named.AddMethod(types.NewFunc(token.NoPos, pkg, "hidden", sig))
	pkg.Scope().Insert(obj)
	got := describe(pkg)
	want := []string{"pkg pkg/x, type T struct{Name string; ...}", "pkg pkg/x, method (*T) Ready() bool"}
	if !slices.Equal(got, want) {
		t.Errorf("describe = %q, want %q", got, want)
	}
}
