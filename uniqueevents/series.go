package uniqueevents

import (
	"context"
	"fmt"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// Periods of a series.
const (
	PeriodDay   = "day"
	PeriodWeek  = "week" // ISO weeks, Monday to Sunday
	PeriodMonth = "month"
)

// MaxSeriesDays is the longest range, in days, one series may cover.
const MaxSeriesDays = 3660

// dateLayout is the format of a series' dates.
const dateLayout = time.DateOnly

// SeriesQuery says which series to compute. Its fields are strings as a
// URL query carries them, so the library and the HTTP API check them the
// same way.
type SeriesQuery struct {
	// Period is PeriodDay, PeriodWeek or PeriodMonth; "" means PeriodDay.
	Period string
	// From and To are the first and last dates counted, YYYY-MM-DD in TZ,
	// both included, at most MaxSeriesDays days.
	From, To string
	// TZ is the IANA time zone of the dates and periods ("Europe/Paris");
	// "" means UTC. The counts are kept per UTC hour, so a zone must be a
	// whole number of hours from UTC at every boundary of the series
	// (Asia/Kolkata, +05:30, is refused).
	TZ string
}

// Series is the number of users of one event first seen in each period.
type Series struct {
	EventName string        `json:"event_name"`
	Period    string        `json:"period"`
	TZ        string        `json:"tz"`
	From      string        `json:"from"`
	To        string        `json:"to"`
	Points    []SeriesPoint `json:"points"`
	// Total is the event's all-time unique-user total, users first seen
	// after To included.
	Total int64 `json:"total"`
}

// SeriesPoint is one period of a series. The first and last periods are
// cut to From and To: a weekly series from a Wednesday starts with the
// Wednesday to Sunday.
type SeriesPoint struct {
	// Start is the first date the point counts, YYYY-MM-DD.
	Start string `json:"start"`
	// NewUsers is the number of users first seen in the period.
	NewUsers int64 `json:"new_users"`
	// Cumulative is the number of users first seen up to the end of the
	// period, those before From included: the event's reach then.
	Cumulative int64 `json:"cumulative"`
}

// UniqueSeries returns the number of users of name first seen in each
// period from q.From to q.To, exactly, with the running total. A user's
// first-seen time is when its first entry was buffered (see the
// operations guide), so a backlog does not shift the series. It returns a
// *uum.ValidationError naming "event_name", "period", "from", "to" or
// "tz" for bad input, an *UnknownEventError for an event never counted;
// any other error means the store could not answer.
// It reads from the read replica when the Client has one (Open honours
// config.Database.ReadURL).
func (c *Client) UniqueSeries(ctx context.Context, name string, q SeriesQuery) (Series, error) {
	if c == nil {
		return Series{}, ErrNoDefault
	}
	if err := c.loggable("event_name", name); err != nil {
		return Series{}, err
	}
	plan, err := planSeries(q)
	if err != nil {
		return Series{}, err
	}
	rs, err := c.readers(ctx)
	if err != nil {
		return Series{}, err
	}
	first, last := time.Unix(plan.bounds[0], 0), time.Unix(plan.bounds[len(plan.bounds)-1]-1, 0)
	days, err := rs.db.EventDays(ctx, name, first, last, plan.hourly)
	if err != nil {
		return Series{}, fmt.Errorf("unique series: %w", err)
	}
	if days.Total == 0 {
		return Series{}, &UnknownEventError{Name: name} // every counted event has a user
	}
	return plan.fill(name, days), nil
}

// UniqueSeries calls UniqueSeries on the default client.
func UniqueSeries(ctx context.Context, name string, q SeriesQuery) (Series, error) {
	return Default().UniqueSeries(ctx, name, q)
}

// seriesPlan is a checked query: its periods as instants.
type seriesPlan struct {
	q      SeriesQuery // normalised: Period and TZ set
	starts []string    // each point's first date
	// bounds[i] is when point i starts, bounds[len(starts)] when the
	// last one ends, in unix seconds: local midnights, each on a whole
	// UTC hour.
	bounds []int64
	// hourly says some bound is not a UTC midnight, so the counts by
	// hour are needed, not only by day.
	hourly bool
}

// planSeries checks q and cuts its range into periods.
func planSeries(q SeriesQuery) (seriesPlan, error) {
	if q.Period == "" {
		q.Period = PeriodDay
	}
	next, ok := periodNext[q.Period]
	if !ok {
		return seriesPlan{}, &uum.ValidationError{Field: "period", Value: q.Period, Reason: "must be day, week or month"}
	}
	loc, err := seriesZone(q.TZ)
	if err != nil {
		return seriesPlan{}, err
	}
	if q.TZ == "" {
		q.TZ = "UTC"
	}
	from, to, err := seriesRange(q.From, q.To)
	if err != nil {
		return seriesPlan{}, err
	}
	p := seriesPlan{q: q}
	end := to.AddDate(0, 0, 1)
	for d := from; d.Before(end); d = next(d) {
		p.starts = append(p.starts, d.Format(dateLayout))
		if err := p.addBound(d, loc); err != nil {
			return seriesPlan{}, err
		}
	}
	return p, p.addBound(end, loc)
}

// periodNext returns the first date of the period after the one holding
// d; dates are midnights UTC, standing for dates in any zone.
var periodNext = map[string]func(d time.Time) time.Time{
	PeriodDay:   func(d time.Time) time.Time { return d.AddDate(0, 0, 1) },
	PeriodWeek:  func(d time.Time) time.Time { return d.AddDate(0, 0, 7-(int(d.Weekday())+6)%7) },
	PeriodMonth: func(d time.Time) time.Time { return time.Date(d.Year(), d.Month()+1, 1, 0, 0, 0, 0, time.UTC) },
}

// addBound appends the instant date d starts in loc, which must be on a
// whole UTC hour: the counts are kept per UTC hour.
func (p *seriesPlan) addBound(d time.Time, loc *time.Location) error {
	at := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc)
	if at.Unix()%3600 != 0 {
		return &uum.ValidationError{Field: "tz", Value: p.q.TZ, Reason: fmt.Sprintf(
			"%s starts at %s, not on a whole UTC hour: counts are kept per UTC hour, so a zone must be a whole number of hours from UTC",
			d.Format(dateLayout), at.Format("15:04 -07:00"))}
	}
	p.bounds = append(p.bounds, at.Unix())
	p.hourly = p.hourly || at.Unix()%(24*3600) != 0
	return nil
}

// seriesZone loads an IANA zone; "" is UTC. "Local" is refused: it would
// mean the server's zone.
func seriesZone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, &uum.ValidationError{Field: "tz", Value: tz, Reason: "must be an IANA time zone such as Europe/Paris"}
	}
	return loc, nil
}

// seriesRange parses and checks the dates, as midnights UTC.
func seriesRange(fromS, toS string) (from, to time.Time, err error) {
	if from, err = parseDate("from", fromS); err != nil {
		return from, to, err
	}
	if to, err = parseDate("to", toS); err != nil {
		return from, to, err
	}
	if to.Before(from) {
		return from, to, &uum.ValidationError{Field: "to", Value: toS, Reason: "must not be before from (" + fromS + ")"}
	}
	if days := int(to.Sub(from).Hours()/24) + 1; days > MaxSeriesDays {
		return from, to, &uum.ValidationError{Field: "to", Value: toS,
			Reason: fmt.Sprintf("the range must be at most %d days, got %d", MaxSeriesDays, days)}
	}
	return from, to, nil
}

func parseDate(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, &uum.ValidationError{Field: field, Value: s, Reason: "required, a date as YYYY-MM-DD"}
	}
	d, err := time.Parse(dateLayout, s)
	if err != nil {
		return time.Time{}, &uum.ValidationError{Field: field, Value: s, Reason: "must be a date as YYYY-MM-DD"}
	}
	return d, nil
}

// fill counts each hour of days (each day when the plan is not hourly)
// into the point it falls in.
func (p seriesPlan) fill(name string, days store.EventDays) Series {
	s := Series{
		EventName: name, Period: p.q.Period, TZ: p.q.TZ, From: p.q.From, To: p.q.To,
		Points: make([]SeriesPoint, len(p.starts)), Total: days.Total,
	}
	before := days.Before
	i := 0 // the point of the hour at hand: hours come in order
	add := func(at, n int64) {
		for i < len(s.Points) && at >= p.bounds[i+1] {
			i++
		}
		switch {
		case at < p.bounds[0]:
			before += n
		case i < len(s.Points):
			s.Points[i].NewUsers += n
		}
	}
	for _, d := range days.Days {
		midnight := d.Date.Unix()
		if !p.hourly {
			add(midnight, d.NewUsers)
			continue
		}
		for h, n := range d.ByHour {
			add(midnight+int64(h)*3600, n)
		}
	}
	sum := before
	for i := range s.Points {
		sum += s.Points[i].NewUsers
		s.Points[i].Start, s.Points[i].Cumulative = p.starts[i], sum
	}
	return s
}
