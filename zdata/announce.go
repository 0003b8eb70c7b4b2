package zdata

// The announcement of docs/ztls-spec.md, Section 9.6: a service that
// publishes v3 (post-quantum) records sets bit 30 of the Zdata_id of
// every v1 and v2 record it publishes. The id is signed with the record,
// so a path can neither forge the bit nor clear it; clients of earlier
// releases treat ids as opaque.

// AnnouncePQBit, set in a v1 or v2 record's Zdata_id, says that the
// service publishes v3 records (docs/ztls-spec.md, Section 9.6). It has
// no meaning in a v3 record, whose fleet ids carry PQEpochIDBit.
const AnnouncePQBit = 1 << 30

// AnnouncesPQ reports whether r is a classical (v1 or v2) record whose
// service says it publishes v3 records: a client of Section 9.6 sends
// no early data under it unless its user asked for classical early data.
func (r *Record) AnnouncesPQ() bool { return !r.V3 && r.ID&AnnouncePQBit != 0 }

// ReasonNoPQZData is the fallback reason of a client that has classical
// Z-data only, for a service that announces (or is pinned to) v3
// records (docs/ztls-spec.md, Section 9.6): a path may have stripped
// them.
const ReasonNoPQZData Reason = "no post-quantum Z-data"

// classicalID makes id, a random or fleet Zdata_id of a classical key,
// say deliberately whether the service announces v3 records: bit 30 set
// exactly when announce, whatever the randomness drew.
func classicalID(id uint32, announce bool) uint32 {
	if announce {
		return id | AnnouncePQBit
	}
	return id &^ AnnouncePQBit
}

// announces reports whether a classical Service's ids carry
// AnnouncePQBit: it announces, or issues the v3 keys itself.
func (o Options) announces() bool { return o.AnnouncePQ || o.PostQuantum }

// issuers are the Services Rotate issues keys with: s, and with
// Options.PostQuantum its v3 twin, which shares s's keyring, certificate,
// seed and BFE key files and issues X25519MLKEM768 keys (s's AttachBFE
// gives them their bfe= records, docs/ztls-spec.md, Section 9.2).
func (s *Service) issuers() []*Service {
	if !s.Options.PostQuantum {
		return []*Service{s}
	}
	pq := *s
	pq.Options.Group, pq.Options.PostQuantum, pq.Options.AnnouncePQ = GroupX25519MLKEM768, false, false
	return []*Service{s, &pq}
}
