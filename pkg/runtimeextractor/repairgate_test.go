package runtimeextractor

import "testing"

func TestWithRepairPolicyKeepsTheDefaultForAnInvalidPolicy(t *testing.T) {
	noSlowVerdict := DefaultRepairPolicy()
	noSlowVerdict.SlowUndos = 0
	for _, p := range []RepairPolicy{{}, noSlowVerdict} {
		s := defaultSettings()
		WithRepairPolicy(p)(&s)
		if s.repairPolicy != DefaultRepairPolicy() {
			t.Errorf("WithRepairPolicy(%+v) set %+v", p, s.repairPolicy)
		}
	}
}
