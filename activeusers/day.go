package activeusers

import (
	"time"

	"github.com/uumhq/uum"
)

// Day is a calendar day in the report time zone, as days since
// 1970-01-01: the drain files each user event under the day its time falls
// on there, so a Day names a set, not an instant.
type Day int32

// DateLayout is how a Day is written: YYYY-MM-DD.
const DateLayout = time.DateOnly

// DayOf returns the day t falls on in loc.
func DayOf(t time.Time, loc *time.Location) Day {
	y, m, d := t.In(loc).Date()
	return dayOfDate(y, m, d)
}

func dayOfDate(y int, m time.Month, d int) Day {
	return Day(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// ParseDay parses a YYYY-MM-DD date; field names the input for the
// *uum.ValidationError it returns for anything else.
func ParseDay(field, s string) (Day, error) {
	if s == "" {
		return 0, &uum.ValidationError{Field: field, Value: s, Reason: "required, a date as YYYY-MM-DD"}
	}
	t, err := time.Parse(DateLayout, s)
	if err != nil {
		return 0, &uum.ValidationError{Field: field, Value: s, Reason: "must be a date as YYYY-MM-DD"}
	}
	return dayOfDate(t.Date()), nil
}

// Date is the day's midnight in UTC, standing for the date in any zone.
func (d Day) Date() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String writes the day as YYYY-MM-DD.
func (d Day) String() string { return d.Date().Format(DateLayout) }

// MarshalText writes the day as YYYY-MM-DD, so JSON shows dates.
func (d Day) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a YYYY-MM-DD date.
func (d *Day) UnmarshalText(b []byte) error {
	v, err := ParseDay("date", string(b))
	*d = v
	return err
}

// Period is the span a series point or a retention cohort covers.
type Period string

// Periods.
const (
	PeriodDay   Period = "day"
	PeriodWeek  Period = "week"  // ISO weeks, Monday to Sunday
	PeriodMonth Period = "month" // calendar months
)

// ParsePeriod reads a period; "" is PeriodDay.
func ParsePeriod(field, s string) (Period, error) {
	switch p := Period(s); p {
	case "":
		return PeriodDay, nil
	case PeriodDay, PeriodWeek, PeriodMonth:
		return p, nil
	}
	return "", &uum.ValidationError{Field: field, Value: s, Reason: "must be day, week or month"}
}

// Start returns the first day of the period holding d.
func (p Period) Start(d Day) Day {
	switch p {
	case PeriodWeek:
		return d - Day((int(d.Date().Weekday())+6)%7)
	case PeriodMonth:
		y, m, _ := d.Date().Date()
		return dayOfDate(y, m, 1)
	}
	return d
}

// Next returns the first day of the period after the one holding d.
func (p Period) Next(d Day) Day {
	switch p {
	case PeriodWeek:
		return p.Start(d) + 7
	case PeriodMonth:
		y, m, _ := d.Date().Date()
		return dayOfDate(y, m+1, 1)
	}
	return d + 1
}

// longerOrEqual reports whether p is at least as long as q: month, week,
// day.
func (p Period) longerOrEqual(q Period) bool { return p.rank() >= q.rank() }

func (p Period) rank() int {
	switch p {
	case PeriodWeek:
		return 1
	case PeriodMonth:
		return 2
	}
	return 0
}
