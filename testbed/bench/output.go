package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// WriteJSON writes the report as indented JSON:
// {"results":[{"protocol","rtt_ms","runs","first_byte_ms":{…},"handshake_ms":{…},"dns_ms":{…},…}]}.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// WriteCSV writes every raw sample, one row per measured connection.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"protocol", "scenario", "response", "rtt_ms", "loss_pct", "run", "dns_ms", "handshake_ms", "first_byte_ms", "early_data", "dns_queries"})
	f := func(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 3, 64) }
	for _, res := range r.Results {
		for i, s := range res.Samples {
			cw.Write([]string{res.Protocol, res.Scenario, res.Response,
				strconv.FormatFloat(res.RTTms, 'f', -1, 64), strconv.FormatFloat(res.LossPct, 'f', -1, 64),
				strconv.Itoa(i + 1), f(s.DNS), f(s.Handshake), f(s.FirstByte), strconv.FormatBool(s.Early), strconv.Itoa(s.DNSQueries)})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// WriteTable writes a human-readable summary: medians per protocol.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%-12s %-12s %8s %5s %9s %9s %11s %9s %6s %6s\n", "protocol", "scenario", "rtt_ms", "runs", "dns_ms", "hs_ms", "first_ms", "p90_ms", "errors", "dns_q")
	for _, res := range r.Results {
		fmt.Fprintf(w, "%-12s %-12s %8.1f %5d %9.2f %9.2f %11.2f %9.2f %6d %6.1f\n", res.Protocol, res.Scenario, res.RTTms, res.Runs,
			res.DNS.Median, res.Handshake.Median, res.FirstByte.Median, res.FirstByte.P90, res.Errors, res.DNSQueries.Median)
	}
}
