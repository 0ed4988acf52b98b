package docstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The figures of docs/architecture.md's "Measuring the layout", which
// TestArchitectureFigures prints (go test -v -run TestArchitectureFigures
// ./internal/testkit/docstest/).
const (
	module = "github.com/uumhq/uum"
	// maxRootNames is the most exported top-level names the root may have.
	maxRootNames = 40
	// pathFrom and pathTo are the ends of the path measured: the drain's
	// commit and whatever writes a counter row.
	pathFrom = "(*" + module + "/processor.Drainer).commit"
	pathTo   = "INSERT INTO counters"
)

// TestArchitectureFigures measures the layout and prints it: the root's
// exported top-level names (methods not counted), the depth of the
// module's import graph (the most packages in one import chain), the
// imports that run from a lower folder tier to a higher one (see tier) and the
// longest way from the drain's commit to a counter row in the call graph,
// as moves between packages and climbs (calls up the import graph: a
// callback). It fails when the root has more than
// maxRootNames names or the way to a counter row climbs more than once
// (the one climb allowed is store.InTx calling the processor's
// transaction).
func TestArchitectureFigures(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("type-checks the module")
	}
	names := rootNames(t)
	t.Logf("root exported top-level names: %d (%s)", len(names), strings.Join(names, " "))
	require.LessOrEqual(t, len(names), maxRootNames)

	pkgs := listPackages(t)
	chain := longestImportChain(pkgs)
	t.Logf("import-graph depth: %d packages (%s)", len(chain), strings.Join(chain, " -> "))
	back := backwardImports(pkgs)
	t.Logf("imports from a lower folder tier to a higher one: %d (%s)", len(back), strings.Join(back, ", "))

	g := newCallGraph(t, pkgs)
	trail, moves, climbs, found := g.readersWalk(pathFrom)
	require.True(t, found, "no way from %s to a function that writes %q", pathFrom, pathTo)
	t.Logf("from the drain's commit to a counter row: %d moves between packages, %d climbs:\n\t%s",
		moves, climbs, strings.Join(trail, "\n\t"))
	require.LessOrEqual(t, climbs, 1, "a callback crosses back up the import graph on the way to a counter row")
}

// rootNames returns the root package's exported top-level names.
func rootNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, "*.go"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			names = append(names, exportedNames(d)...)
		}
	}
	return names
}

// exportedNames returns the exported top-level names d declares: its
// functions, types, constants and variables, not methods.
func exportedNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			names = append(names, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// listedPackage is what go list says of a package.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Export     string
	Standard   bool
}

// listPackages returns the module's packages and every dependency, each
// after its own (go list -deps order), with their export data.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,GoFiles,Imports,Export,Standard", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs
		}
		require.NoError(t, err)
		pkgs = append(pkgs, p)
	}
}

func ours(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

// longestImportChain returns the longest chain of the module's packages
// in which each imports the next, the importer first.
func longestImportChain(pkgs []listedPackage) []string {
	chains := importChains(pkgs)
	var best []string
	for _, p := range pkgs {
		if c := chains[p.ImportPath]; len(c) > len(best) {
			best = c
		}
	}
	return best
}

// importChains returns each module package's longest import chain, from
// it down: its length is the package's floor in the import graph.
func importChains(pkgs []listedPackage) map[string][]string {
	longest := map[string][]string{}
	for _, p := range pkgs { // dependencies come first
		if !ours(p.ImportPath) {
			continue
		}
		var below []string
		for _, imp := range p.Imports {
			if c := longest[imp]; ours(imp) && len(c) > len(below) {
				below = c
			}
		}
		longest[p.ImportPath] = append([]string{short(p.ImportPath)}, below...)
	}
	return longest
}

func short(path string) string {
	if path == module {
		return "uum"
	}
	return strings.TrimPrefix(path, module+"/")
}

// callGraph is the module's static call graph, by function: its nodes are
// declared functions (types.Func.FullName) and function literals
// ("lit:" and where); an edge is a call, a reference to a function, or a
// call through an interface to any module type that implements it. A
// function literal or function value handed to a function of another
// package is an edge from that function to it (a callback).
type callGraph struct {
	edges   map[string][]string
	pkg     map[string]string // node -> package path
	funcPkg map[string]string // declared function -> package path, known before its body is walked
	// callbacks are, by declared function, the function literals and
	// values other packages hand it; "dyn:<function>" among its edges is
	// where it calls a function value.
	callbacks map[string][]string
	// fieldFuncs are, by struct field of function type ("field:" and
	// where it is declared), what code stores in it; "field:..." among a
	// node's edges is where it uses such a field.
	fieldFuncs map[string][]string
	targets    map[string]bool // nodes whose code holds pathTo
	floor      map[string]int  // package path -> its floor (see importChains)
}

func newCallGraph(t *testing.T, pkgs []listedPackage) *callGraph {
	t.Helper()
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	checked := map[string]*types.Package{}
	gc := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	imp := importerFunc(func(path string) (*types.Package, error) {
		if p, ok := checked[path]; ok {
			return p, nil
		}
		return gc.Import(path)
	})
	g := &callGraph{edges: map[string][]string{}, pkg: map[string]string{}, funcPkg: map[string]string{}, callbacks: map[string][]string{}, fieldFuncs: map[string][]string{}, targets: map[string]bool{}, floor: map[string]int{}}
	for p, c := range importChains(pkgs) {
		g.floor[p] = len(c)
	}
	var (
		infos []*types.Info
		files [][]*ast.File
		named []*types.Named
	)
	for _, p := range pkgs {
		if !ours(p.ImportPath) {
			continue
		}
		var fs []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			fs = append(fs, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		tp, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, fs, info)
		require.NoError(t, err, "type-check %s", p.ImportPath)
		checked[p.ImportPath] = tp
		infos, files = append(infos, info), append(files, fs)
		for _, n := range tp.Scope().Names() {
			if tn, ok := tp.Scope().Lookup(n).(*types.TypeName); ok {
				if nt, ok := tn.Type().(*types.Named); ok && !types.IsInterface(nt) {
					named = append(named, nt)
				}
			}
		}
	}
	for i := range infos {
		for _, f := range files[i] {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					fn := infos[i].Defs[fd.Name].(*types.Func)
					w := &walker{g: g, info: infos[i], fset: fset, named: named, decl: fn.FullName()}
					w.node(fn.FullName(), fn.Pkg().Path(), fd.Body)
				}
			}
		}
	}
	return g
}

// pkgOf returns the package of a node.
func (g *callGraph) pkgOf(node string) string {
	if p, ok := g.pkg[node]; ok {
		return p
	}
	return g.funcPkg[node]
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// walker adds the edges of one function's body.
type walker struct {
	g     *callGraph
	info  *types.Info
	fset  *token.FileSet
	named []*types.Named
	decl  string // the declared function whose body (or literal in it) is walked
}

// node adds the edges of body, the code of node in package pkg.
func (w *walker) node(node, pkg string, body ast.Node) {
	w.g.pkg[node] = pkg
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			lit := w.lit(n, pkg)
			w.g.edges[node] = append(w.g.edges[node], lit)
			return false
		case *ast.CallExpr:
			w.callbacks(node, pkg, n)
		case *ast.BasicLit:
			if n.Kind == token.STRING && strings.Contains(n.Value, pathTo) {
				w.g.targets[node] = true
			}
		case *ast.Ident:
			switch obj := w.info.Uses[n].(type) {
			case *types.Const:
				if obj.Val().Kind() == constant.String && strings.Contains(constant.StringVal(obj.Val()), pathTo) {
					w.g.targets[node] = true
				}
			case *types.Func:
				w.g.edges[node] = append(w.g.edges[node], w.callees(obj)...)
			case *types.Var:
				if _, ok := obj.Type().Underlying().(*types.Signature); ok && obj.IsField() {
					// A field holding a function: what it may run is
					// what code stores in it.
					w.g.edges[node] = append(w.g.edges[node], w.fieldKey(obj))
				} else if ok {
					// A function value, called here or handed on: what
					// it may run is what the function was handed.
					w.g.edges[node] = append(w.g.edges[node], "dyn:"+w.decl)
				}
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && i < len(n.Rhs) {
					w.store(w.info.Uses[sel.Sel], n.Rhs[i], pkg)
				}
			}
		case *ast.KeyValueExpr:
			if key, ok := n.Key.(*ast.Ident); ok {
				w.store(w.info.Uses[key], n.Value, pkg)
			}
		}
		return true
	})
}

// lit adds a function literal as a node of its own and returns it.
func (w *walker) lit(n *ast.FuncLit, pkg string) string {
	pos := w.fset.Position(n.Pos())
	name := fmt.Sprintf("lit:%s:%d", filepath.Base(pos.Filename), pos.Line)
	if _, done := w.g.pkg[name]; !done {
		w.node(name, pkg, n.Body)
	}
	return name
}

// fieldKey names a struct field of function type as an edge.
func (w *walker) fieldKey(v *types.Var) string {
	return "field:" + w.fset.Position(v.Pos()).String()
}

// store records that value is stored in obj when obj is a struct field of
// function type: a function literal, a function, or a call to one that
// returns the function (which the reader then reads).
func (w *walker) store(obj types.Object, value ast.Expr, pkg string) {
	v, ok := obj.(*types.Var)
	if !ok || !v.IsField() {
		return
	}
	if _, ok := v.Type().Underlying().(*types.Signature); !ok {
		return
	}
	key := w.fieldKey(v)
	switch value := ast.Unparen(value).(type) {
	case *ast.FuncLit:
		w.g.fieldFuncs[key] = append(w.g.fieldFuncs[key], w.lit(value, pkg))
	case *ast.CallExpr:
		if f := w.funcOf(value.Fun); f != nil {
			w.g.fieldFuncs[key] = append(w.g.fieldFuncs[key], w.callees(f)...)
		}
	default:
		if f := w.funcOf(value); f != nil {
			w.g.fieldFuncs[key] = append(w.g.fieldFuncs[key], w.callees(f)...)
		}
	}
}

// funcOf returns the function e names (f, pkg.F, x.M), or nil.
func (w *walker) funcOf(e ast.Expr) *types.Func {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		f, _ := w.info.Uses[e].(*types.Func)
		return f
	case *ast.SelectorExpr:
		f, _ := w.info.Uses[e.Sel].(*types.Func)
		return f
	}
	return nil
}

// callbacks adds, for a call to a function of another package, an edge
// from that function to each function literal or function value among
// the call's arguments: it may call them.
func (w *walker) callbacks(node, pkg string, call *ast.CallExpr) {
	callee := w.funcOf(call.Fun)
	var others []string // what the call may run in other packages
	if callee != nil {
		for _, c := range w.callees(callee) {
			if w.g.pkgOf(c) != pkg {
				others = append(others, c)
			}
		}
	}
	if len(others) == 0 {
		return
	}
	for _, arg := range call.Args {
		ast.Inspect(arg, func(n ast.Node) bool {
			var target []string
			switch n := n.(type) {
			case *ast.FuncLit:
				target = []string{w.lit(n, pkg)}
			case *ast.Ident:
				if f, ok := w.info.Uses[n].(*types.Func); ok {
					target = w.callees(f)
				}
			}
			for _, c := range others {
				w.g.callbacks[c] = append(w.g.callbacks[c], target...)
			}
			return true
		})
	}
}

// callees returns the nodes a use of f may run: f itself, or for an
// interface method the module types' methods that implement it.
func (w *walker) callees(f *types.Func) []string {
	if f.Pkg() == nil || !ours(f.Pkg().Path()) {
		return nil
	}
	sig := f.Signature()
	if sig.Recv() == nil || !types.IsInterface(sig.Recv().Type()) {
		w.g.funcPkg[f.FullName()] = f.Pkg().Path()
		return []string{f.FullName()}
	}
	iface := sig.Recv().Type().Underlying().(*types.Interface)
	var out []string
	for _, nt := range w.named {
		for _, typ := range []types.Type{nt, types.NewPointer(nt)} {
			if !types.Implements(typ, iface) {
				continue
			}
			obj, _, _ := types.LookupFieldOrMethod(typ, true, f.Pkg(), f.Name())
			if m, ok := obj.(*types.Func); ok {
				out = append(out, m.FullName())
				w.g.funcPkg[m.FullName()] = m.Pkg().Path()
			}
			break
		}
	}
	return out
}

// readersWalk follows the code from the node from as a reader does:
// each call where it stands in the source, into its callee and back,
// each function read once, callbacks where the callee calls them, until a
// node that writes a counter row. It returns the packages in the order
// read, the moves between packages (calls and returns) and the climbs
// (calls up to a package on a higher floor of the import graph than the
// caller's: callbacks).
func (g *callGraph) readersWalk(from string) (trail []string, moves, climbs int, found bool) {
	read := map[string]bool{}
	var walk func(n string) bool
	walk = func(n string) bool {
		read[n] = true
		if g.targets[n] {
			return true
		}
		for _, next := range g.next(n) {
			if read[next] {
				continue
			}
			cross := g.pkg[next] != g.pkg[n]
			if cross {
				moves++
				if g.floor[g.pkg[next]] > g.floor[g.pkg[n]] {
					climbs++ // a call to a higher floor: a callback
				}
				trail = append(trail, short(g.pkg[next])+" ("+next+")")
			}
			if walk(next) {
				return true
			}
			if cross {
				moves++
				trail = append(trail, short(g.pkg[n]))
			}
		}
		return false
	}
	trail = []string{short(g.pkg[from])}
	found = walk(from)
	return trail, moves, climbs, found
}

// next returns what n runs, in source order, with each call through a
// function value replaced by the callbacks n's function was handed.
func (g *callGraph) next(n string) []string {
	var out []string
	for _, e := range g.edges[n] {
		if decl, ok := strings.CutPrefix(e, "dyn:"); ok {
			out = append(out, g.callbacks[decl]...)
			continue
		}
		if strings.HasPrefix(e, "field:") {
			out = append(out, g.fieldFuncs[e]...)
			continue
		}
		out = append(out, e)
	}
	return out
}
