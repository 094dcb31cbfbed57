package nvidiatoml

import "testing"

// FuzzRebuild feeds arbitrary files, runtime subsets, layouts and
// set-default choices through Rebuild and checks the properties of
// checkProperties: fixed points, exactly the requested nvidia tables,
// every other statement kept in order, and parsing preserved.
func FuzzRebuild(f *testing.F) {
	for _, gc := range loadGolden(f) {
		var sel uint8
		for _, r := range gc.rts {
			for i, ir := range incidentRuntimes {
				if r.Name == ir.Name {
					sel |= 1 << i
				}
			}
		}
		if gc.layout.Version == 3 {
			sel |= 1 << 3
		}
		f.Add(gc.sections["input"], gc.setDef, sel)
	}
	f.Fuzz(func(t *testing.T, src []byte, setDefault bool, sel uint8) {
		var rts []Runtime
		for i, r := range incidentRuntimes {
			if sel&(1<<i) != 0 {
				rts = append(rts, r)
			}
		}
		if len(rts) == 0 {
			rts = incidentRuntimes[:1]
		}
		l := Layout{Version: 2}
		if sel&(1<<3) != 0 {
			l.Version = 3
		}
		checkProperties(t, src, l, rts, setDefault, true)
	})
}
