package main

// Post-quantum Z-data in 'zdata check' (docs/ztls-spec.md, Section 9):
// the v3 records in the TXT answer, their sizes, whether the classical
// records announce them, and the transport a client needs.

import (
	"fmt"
	"io"
	"strings"

	"github.com/ztls-project/ztls/zdata"
)

// pqCheck is what 'zdata check' found of post-quantum Z-data.
type pqCheck struct {
	V3Records int `json:"v3_records"`
	// V3Bytes is each v3 record's TXT RDATA size (its character-strings
	// with their length bytes), in the answer's order.
	V3Bytes []int `json:"v3_rdata_bytes"`
	// Announcing and Classical count the v1/v2 records and those among
	// them whose Zdata_id has bit 30 set (Section 9.6).
	Classical  int `json:"classical_records"`
	Announcing int `json:"announcing_records"`
	// TXTAnswerBytes is the whole TXT answer; Transport what a client
	// needs for it: "udp", or "tcp or tls" over 1232 bytes (Section 9.7).
	TXTAnswerBytes int    `json:"txt_answer_bytes"`
	Transport      string `json:"transport"`
	// Selected: the record a client would use is a v3 record.
	Selected bool   `json:"selected_v3"`
	Problem  string `json:"problem,omitempty"`
}

// checkPQ sizes the v3 records among txts (the TXT answer, of size
// answerBytes); selected is the record a client would use (nil: none).
// Nil when the answer holds neither v3 nor announcing records.
func checkPQ(txts [][]string, answerBytes int, selected *zdata.Record) *pqCheck {
	c := &pqCheck{TXTAnswerBytes: answerBytes, Transport: "udp"}
	for _, strs := range txts {
		r, err := zdata.ParseTXT(strs)
		switch {
		case err == nil && r.V3:
			c.V3Records++
			c.V3Bytes = append(c.V3Bytes, rdataBytes(strs))
		case err == nil:
			c.Classical++
			if r.AnnouncesPQ() {
				c.Announcing++
			}
		case len(strs) > 0 && strings.TrimSpace(strs[0]) == "v=ztls3":
			c.V3Records++
			c.V3Bytes = append(c.V3Bytes, rdataBytes(strs))
			c.Problem = "a v3 record does not parse: " + err.Error()
		}
	}
	if c.V3Records == 0 && c.Announcing == 0 {
		return nil
	}
	if answerBytes > 1232 {
		c.Transport = "tcp or tls"
	}
	c.Selected = selected != nil && selected.V3
	switch {
	case c.Problem != "":
	case c.V3Records == 0:
		c.Problem = "the classical records announce v3 records (Zdata_id bit 30), but the answer holds none: clients of Section 9.6 fall back to TLS 1.3"
	case c.Announcing < c.Classical:
		c.Problem = fmt.Sprintf("%d of %d classical records do not announce the v3 records: a path that strips the v3 records gives clients classical early data (Section 9.6)", c.Classical-c.Announcing, c.Classical)
	}
	return c
}

// rdataBytes is a TXT record's RDATA size: each string and its length byte.
func rdataBytes(strs []string) int {
	n := 0
	for _, s := range strs {
		n += 1 + len(s)
	}
	return n
}

func (c *pqCheck) writeText(w io.Writer) {
	if c == nil {
		return
	}
	sizes := make([]string, len(c.V3Bytes))
	for i, b := range c.V3Bytes {
		sizes[i] = fmt.Sprint(b)
	}
	fmt.Fprintf(w, "post-quantum: %d v3 record(s) (TXT RDATA %s bytes), %d of %d classical record(s) announcing; TXT answer %d bytes: needs %s",
		c.V3Records, orDash(strings.Join(sizes, ", ")), c.Announcing, c.Classical, c.TXTAnswerBytes, c.Transport)
	if c.Selected {
		fmt.Fprint(w, "; a client uses the v3 record")
	}
	fmt.Fprintln(w)
	if c.Problem != "" {
		fmt.Fprintf(w, "post-quantum problem: %s\n", c.Problem)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
