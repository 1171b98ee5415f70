// Command apirecord records the module's exported API, one declaration a
// line, in api/exported.txt, and checks that the record is current, as Go's
// own api/ files do for the standard library. A host vendors this module at
// a pseudo-version and calls its constructors, so a change that removes or
// alters a line breaks it; such a change must update the record in the same
// commit, where a reviewer sees it as a removed line (docs/embedding.md#api).
//
//	go run ./hack/apirecord          check: exit 1 when the record differs
//	go run ./hack/apirecord -write   rewrite the record
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// recordPath is the record, relative to the module root.
const recordPath = "api/exported.txt"

// apiPatterns are the packages an embedder imports. cmd is a binary,
// pkg/testcluster and the internal packages are for tests.
var apiPatterns = []string{"./fsm/...", "./pkg/..."}

func main() {
	write := flag.Bool("write", false, "rewrite "+recordPath+" instead of checking it")
	flag.Parse()
	lines, err := exportedAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "apirecord:", err)
		os.Exit(2)
	}
	current := strings.Join(lines, "\n") + "\n"
	if *write {
		if err := os.MkdirAll("api", 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "apirecord:", err)
			os.Exit(2)
		}
		if err := os.WriteFile(recordPath, []byte(current), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "apirecord:", err)
			os.Exit(2)
		}
		return
	}
	recorded, err := os.ReadFile(recordPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apirecord:", err)
		os.Exit(2)
	}
	removed, added := difference(strings.Split(strings.TrimSpace(string(recorded)), "\n"), lines)
	if len(removed) == 0 && len(added) == 0 {
		return
	}
	report(os.Stderr, removed, added)
	os.Exit(1)
}

// report says what changed: removed or altered lines break an embedder,
// added ones do not, and both belong in the record.
func report(w io.Writer, removed, added []string) {
	if len(removed) > 0 {
		fmt.Fprintf(w, "incompatible API change: %d recorded declaration(s) are gone or changed (an embedder that uses them no longer builds):\n", len(removed))
		for _, l := range removed {
			fmt.Fprintln(w, "  -", l)
		}
	}
	if len(added) > 0 {
		fmt.Fprintf(w, "new API, not recorded yet (compatible):\n")
		for _, l := range added {
			fmt.Fprintln(w, "  +", l)
		}
	}
	fmt.Fprintf(w, "run `make api` and commit %s with the change (docs/embedding.md#api says what counts as breaking)\n", recordPath)
}

// difference returns the lines only in recorded, and those only in current.
func difference(recorded, current []string) (removed, added []string) {
	for _, l := range recorded {
		if l != "" && !slices.Contains(current, l) {
			removed = append(removed, l)
		}
	}
	for _, l := range current {
		if !slices.Contains(recorded, l) {
			added = append(added, l)
		}
	}
	return removed, added
}

type listed struct {
	ImportPath string
	Name       string
	Export     string
	DepOnly    bool
}

// exportedAPI type-checks nothing itself: it reads the compiler's export
// data of the API packages (go list -export, from the build cache) and
// describes every exported declaration.
func exportedAPI() ([]string, error) {
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Name,Export,DepOnly"}, apiPatterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	exports := map[string]string{}
	var api []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && p.Name != "main" && !strings.Contains(p.ImportPath, "/internal/") && !strings.HasSuffix(p.ImportPath, "/testcluster") {
			api = append(api, p)
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var lines []string
	for _, p := range api {
		pkg, err := imp.Import(p.ImportPath)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", p.ImportPath, err)
		}
		lines = append(lines, describe(pkg)...)
	}
	slices.Sort(lines)
	return lines, nil
}

// describe lists pkg's exported declarations: constants with their values,
// variables, functions, types with their underlying type, and the exported
// methods of every exported type (value and pointer receivers).
func describe(pkg *types.Package) []string {
	short := strings.TrimPrefix(pkg.Path(), modulePrefix(pkg.Path()))
	qualify := func(other *types.Package) string {
		if other == pkg {
			return ""
		}
		return other.Path()
	}
	var lines []string
	add := func(s string) { lines = append(lines, "pkg "+short+", "+s) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			add(fmt.Sprintf("const %s %s = %s", o.Name(), types.TypeString(o.Type(), qualify), o.Val().ExactString()))
		case *types.TypeName:
			if o.IsAlias() {
				add(fmt.Sprintf("type %s = %s", o.Name(), types.TypeString(types.Unalias(o.Type()), qualify)))
				continue
			}
			add(fmt.Sprintf("type %s %s", o.Name(), underlying(o.Type().Underlying(), qualify)))
			for _, recv := range []types.Type{o.Type(), types.NewPointer(o.Type())} {
				ms := types.NewMethodSet(recv)
				for i := range ms.Len() {
					m := ms.At(i).Obj()
					// Promoted methods and those of the value set listed
					// again for the pointer are described once, where declared.
					if !m.Exported() || len(ms.At(i).Index()) > 1 {
						continue
					}
					if _, isPtr := recv.(*types.Pointer); isPtr && types.NewMethodSet(o.Type()).Lookup(pkg, m.Name()) != nil {
						continue
					}
					add(fmt.Sprintf("method (%s) %s%s", types.TypeString(recv, qualify), m.Name(),
						strings.TrimPrefix(types.TypeString(m.Type(), qualify), "func")))
				}
			}
		default:
			add(types.ObjectString(obj, qualify))
		}
	}
	return lines
}

// underlying describes a type's underlying type; a struct shows its exported
// fields only, and "..." where it has others: those are free to change.
func underlying(t types.Type, qualify types.Qualifier) string {
	st, ok := t.(*types.Struct)
	if !ok {
		return types.TypeString(t, qualify)
	}
	var fields []string
	hidden := false
	for i := range st.NumFields() {
		f := st.Field(i)
		switch {
		case !f.Exported():
			hidden = true
		case f.Embedded():
			fields = append(fields, types.TypeString(f.Type(), qualify))
		default:
			fields = append(fields, f.Name()+" "+types.TypeString(f.Type(), qualify))
		}
	}
	if hidden {
		fields = append(fields, "...")
	}
	return "struct{" + strings.Join(fields, "; ") + "}"
}

// modulePrefix is the module path and a slash, so records read "pkg
// pkg/status" rather than the whole import path.
func modulePrefix(path string) string {
	const module = "github.com/insights-runtime-extractor/controller/"
	if strings.HasPrefix(path, module) {
		return module
	}
	return ""
}
