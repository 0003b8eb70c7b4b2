package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 101; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(ds)
	want := Summary{Median: 51, Mean: 51, P90: 91, P99: 100, Min: 1, Max: 101}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("empty input gave a non-zero summary")
	}
}

func sampleReport() *Report {
	r := &Report{}
	for _, p := range []string{"gotls", "quic"} {
		res := Result{Protocol: p, RTTms: 20, Scenario: "stub", Response: Response5B}
		for i := 0; i < 5; i++ {
			res.Samples = append(res.Samples, Sample{DNS: time.Millisecond, Handshake: 40 * time.Millisecond, FirstByte: time.Duration(60+i) * time.Millisecond})
		}
		res.Runs = len(res.Samples)
		r.Results = append(r.Results, res)
	}
	return r
}

func TestReportOutputs(t *testing.T) {
	r := sampleReport()
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(js.Bytes(), &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"protocol", "rtt_ms", "runs", "first_byte_ms", "handshake_ms", "dns_ms"} {
		if _, ok := generic.Results[0][k]; !ok {
			t.Errorf("JSON result lacks %q", k)
		}
	}
	fb := generic.Results[0]["first_byte_ms"].(map[string]any)
	for _, k := range []string{"median", "mean", "p90", "p99", "min", "max"} {
		if _, ok := fb[k]; !ok {
			t.Errorf("first_byte_ms lacks %q", k)
		}
	}
	var cs bytes.Buffer
	if err := r.WriteCSV(&cs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 11 || rows[1][0] != "gotls" || rows[1][8] != "60.000" {
		t.Fatalf("CSV rows %v", rows[:2])
	}
	var tb strings.Builder
	r.WriteTable(&tb)
	if strings.Count(tb.String(), "\n") != 3 {
		t.Fatalf("table:\n%s", tb.String())
	}
}

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	files, err := sampleReport().Plot(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cdf-stub-rtt20.png", "cdf-stub-rtt20.svg", "bars-stub.png", "bars-stub.svg"}
	if len(files) != len(want) {
		t.Fatalf("wrote %v", files)
	}
	for _, f := range want {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v (%d bytes)", f, err, st.Size())
		}
	}
}

func TestReadRequest(t *testing.T) {
	p, err := readRequest(strings.NewReader("GET /5b HTTP/1.0\r\nHost: x\r\n\r\n"))
	if err != nil || p != "5b" {
		t.Fatalf("path %q, %v", p, err)
	}
	for _, bad := range []string{"", "GET /5b HTTP/1.0\r\n", "POST / HTTP/1.0\r\n\r\n", "GET 5b HTTP/1.0\r\n\r\n", "GET // 0\r\n\r\n", strings.Repeat("A", 9000)} {
		if _, err := readRequest(strings.NewReader(bad)); err == nil {
			t.Errorf("%.20q accepted", bad)
		}
	}
}

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("GET /5b HTTP/1.0\r\nHost: x\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := readRequest(bytes.NewReader(b))
		if err == nil && strings.HasPrefix(p, "/") {
			t.Fatalf("path %q keeps its slash", p)
		}
	})
}

func TestReadRecord(t *testing.T) {
	rec := []byte{22, 3, 1, 0, 3, 1, 2, 3}
	got, err := readRecord(bytes.NewReader(append(rec, 9)))
	if err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("record %v, %v", got, err)
	}
	for _, bad := range [][]byte{{23, 3, 3, 0, 1, 0}, {22, 3, 1, 0, 5, 1}, {22, 3}, {22, 3, 1, 0xff, 0xff}} {
		if _, err := readRecord(bytes.NewReader(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func FuzzReadRecord(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 3, 1, 2, 3})
	f.Add([]byte{23, 3, 3, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := readRecord(bytes.NewReader(b))
		if err == nil && (len(rec) < 5 || len(rec) != 5+(int(rec[3])<<8|int(rec[4]))) {
			t.Fatalf("record of %d bytes with length field %d", len(rec), int(rec[3])<<8|int(rec[4]))
		}
	})
}
