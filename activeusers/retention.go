package activeusers

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/uumhq/uum"
)

// Cohort kinds: who a retention row follows.
const (
	// CohortActive follows the users active in the cohort period.
	CohortActive = "active"
	// CohortNew follows the users first active in the cohort period:
	// active then, and not in the NewLookbackDays before the first cohort
	// nor in an earlier cohort period.
	CohortNew = "new"
)

// RetentionQuery is a checked retention matrix.
type RetentionQuery struct {
	Period Period
	Cohort string
	// First is the first cohort period's first day; Cohorts rows follow
	// it, each followed for Periods periods after its own.
	First   Day
	Cohorts int
	Periods int
	Today   Day
}

// NewRetention checks a retention query: cohorts are the whole periods
// holding from to to (to cut to today), each followed for periods periods.
// The errors name "cohort", "from", "to" or "periods".
func NewRetention(p Period, cohort string, from, to, today Day, periods int) (RetentionQuery, error) {
	if cohort != CohortActive && cohort != CohortNew {
		return RetentionQuery{}, &uum.ValidationError{Field: "cohort", Value: cohort, Reason: "must be active or new"}
	}
	if periods < 1 || periods > MaxPeriods {
		return RetentionQuery{}, &uum.ValidationError{Field: "periods", Value: fmt.Sprint(periods),
			Reason: fmt.Sprintf("must be a whole number from 1 to %d", MaxPeriods)}
	}
	r, err := NewRange(from, to, today)
	if err != nil {
		return RetentionQuery{}, err
	}
	q := RetentionQuery{Period: p, Cohort: cohort, First: p.Start(r.From), Periods: periods, Today: today}
	for d := q.First; d <= r.To; d = p.Next(d) {
		q.Cohorts++
	}
	if q.Cohorts > MaxCohorts {
		return RetentionQuery{}, &uum.ValidationError{Field: "to", Value: to.String(),
			Reason: fmt.Sprintf("at most %d cohort %ss, got %d", MaxCohorts, p, q.Cohorts)}
	}
	if days := int(q.last()-q.First) + 1; days > MaxDays {
		return RetentionQuery{}, &uum.ValidationError{Field: "periods", Value: fmt.Sprint(periods),
			Reason: fmt.Sprintf("the cohorts and their follow-up periods must read at most %d days, got %d", MaxDays, days)}
	}
	return q, nil
}

// last is the last day the matrix reads: the end of the last follow-up
// period, cut to today.
func (q RetentionQuery) last() Day {
	d := q.First
	for range q.Cohorts + q.Periods {
		d = q.Period.Next(d)
	}
	return min(d-1, q.Today)
}

// Retention is a retention matrix: a row per cohort.
type Retention struct {
	Period  Period      `json:"period"`
	Cohort  string      `json:"cohort"`
	Periods int         `json:"periods"`
	Rows    []CohortRow `json:"cohorts"`
}

// CohortRow is one cohort and how many of its users were active in each
// period after its own; periods that have not begun are left out.
type CohortRow struct {
	Start Day    `json:"start"`
	Users uint64 `json:"users"`
	// Partial is true when the cohort period holds today.
	Partial  bool   `json:"partial"`
	Retained []Cell `json:"retained"`
}

// Cell is the cohort's users active in the period starting at Start; its
// Offset-th period after the cohort's.
type Cell struct {
	Offset  int    `json:"offset"`
	Start   Day    `json:"start"`
	Users   uint64 `json:"users"`
	Partial bool   `json:"partial"`
}

// ComputeRetention computes q's matrix: each period's users are unioned
// once, and each cell is one intersection count.
func ComputeRetention(s Sets, q RetentionQuery) (Retention, error) {
	var seen *roaring.Bitmap // CohortNew: users active before the cohort at hand
	if q.Cohort == CohortNew {
		var err error
		if seen, err = union(s, q.First-NewLookbackDays, q.First-1); err != nil {
			return Retention{}, err
		}
		seen = seen.Clone()
	}
	type period struct {
		start, end Day
		users      *roaring.Bitmap
	}
	var periods []period
	for d := q.First; d <= q.last() && len(periods) < q.Cohorts+q.Periods; d = q.Period.Next(d) {
		end := min(q.Period.Next(d)-1, q.Today)
		u, err := union(s, d, end)
		if err != nil {
			return Retention{}, err
		}
		periods = append(periods, period{start: d, end: end, users: u})
	}
	out := Retention{Period: q.Period, Cohort: q.Cohort, Periods: q.Periods, Rows: make([]CohortRow, 0, q.Cohorts)}
	for i := range q.Cohorts {
		p := periods[i]
		cohort := p.users
		if seen != nil {
			cohort = roaring.AndNot(p.users, seen)
			seen.Or(p.users)
		}
		row := CohortRow{Start: p.start, Users: cohort.GetCardinality(), Partial: p.end == q.Today, Retained: []Cell{}}
		for k := 1; k <= q.Periods && i+k < len(periods); k++ {
			f := periods[i+k]
			row.Retained = append(row.Retained, Cell{Offset: k, Start: f.start, Users: cohort.AndCardinality(f.users), Partial: f.end == q.Today})
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}
