package field25519

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGeneratedCodeIsStraightLine is the constant-time review of
// field_amd64.s, automated: every instruction is one of a short list whose
// timing does not depend on its operands (MOV, ADD/ADC/ADCX/ADOX,
// SUB/SBB, AND/XOR/NEG, MULX, IMUL by a constant, RET), so there is no
// jump, no CMOV, no division and no label to loop to; every memory operand
// is a register plus a constant offset, with no index register; and every
// register used as an address is written only by loading a pointer
// parameter (MOVQ name+off(FP), reg). So neither the instruction stream nor
// any address depends on the values of field elements or of swap.
func TestGeneratedCodeIsStraightLine(t *testing.T) {
	src, err := os.ReadFile("field_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"MOVQ": true, "ADDQ": true, "ADCQ": true, "ADCXQ": true, "ADOXQ": true,
		"SUBQ": true, "SBBQ": true, "ANDQ": true, "XORQ": true, "NEGQ": true,
		"MULXQ": true, "IMUL3Q": true, "RET": true,
	}
	memRe := regexp.MustCompile(`(-?[0-9]*|[a-z]+\+[0-9]+)\(([A-Z0-9]+)\)(\([A-Z0-9]+\*[0-9]\))?`)
	paramLoad := regexp.MustCompile(`^MOVQ [a-z]+\+[0-9]+\(FP\), ([A-Z0-9]+)$`)
	var fn string
	var funcs, instrs int
	bases := map[string]bool{}   // registers used as addresses in fn
	written := map[string]bool{} // registers fn writes other than by a parameter load
	check := func() {
		for r := range bases {
			if written[r] {
				t.Errorf("%s: %s is an address but is computed, not loaded from a parameter", fn, r)
			}
		}
	}
	for n, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") || strings.HasPrefix(line, "#include") {
			continue
		}
		if strings.HasPrefix(line, "TEXT ") {
			check()
			fn, bases, written = line, map[string]bool{}, map[string]bool{}
			funcs++
			continue
		}
		if strings.HasSuffix(line, ":") {
			t.Errorf("line %d: label %q: the code must be straight-line", n+1, line)
			continue
		}
		fields := strings.Fields(line)
		op := fields[0]
		if !allowed[op] {
			t.Errorf("line %d: %q: %s is not on the list of constant-time instructions", n+1, line, op)
		}
		instrs++
		norm := op + " " + strings.Join(strings.Fields(strings.Join(fields[1:], " ")), " ")
		for _, m := range memRe.FindAllStringSubmatch(line, -1) {
			if m[3] != "" {
				t.Errorf("line %d: %q: indexed memory operand", n+1, line)
			}
			if m[2] != "FP" {
				bases[m[2]] = true
			}
		}
		if paramLoad.MatchString(norm) {
			continue
		}
		operands := strings.Split(strings.Join(fields[1:], ""), ",")
		dests := operands[len(operands)-1:]
		if op == "MULXQ" && len(operands) == 3 {
			dests = operands[1:]
		}
		for _, d := range dests {
			if !strings.Contains(d, "(") {
				written[d] = true
			}
		}
	}
	check()
	if funcs != 8 || instrs < 1000 {
		t.Fatalf("read %d functions and %d instructions from field_amd64.s; the scan is out of step with the generator", funcs, instrs)
	}
}
