package uniqueevents

import (
	"fmt"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
)

// suffixes are the facility variant suffixes of one tracked facility id,
// built once so that a call only concatenates.
type suffixes struct {
	explicit string // "_oh_757"
	site     string // "_oh_site_757"
}

// Facility variants are "<name>_oh_<id>" (explicit mode) and
// "<name>_oh_site_<id>" (user mode).
const (
	explicitInfix = "_oh_"
	siteMark      = "site_"
)

// trackedFacilities checks the tracked ids and builds their suffixes.
func trackedFacilities(ids []string) (map[string]suffixes, error) {
	m := make(map[string]suffixes, len(ids))
	for i, id := range ids {
		if err := uum.ValidateFacilityID(fmt.Sprintf("tracked facility ids[%d]", i), id); err != nil {
			return nil, err
		}
		m[id] = suffixes{explicit: explicitInfix + id, site: explicitInfix + siteMark + id}
	}
	return m, nil
}

// trackedEvents checks the names that get user-mode variants: each must
// leave room for its longest variant.
func trackedEvents(names []string) (map[string]struct{}, error) {
	m := make(map[string]struct{}, len(names))
	for i, n := range names {
		field := fmt.Sprintf("facility tracked events[%d]", i)
		if err := uum.ValidateName(field, n); err != nil {
			return nil, err
		}
		if len(n) > config.MaxFacilityTrackedEventLen {
			return nil, &uum.ValidationError{Field: field, Value: n, Reason: fmt.Sprintf(
				"must be at most %d characters, so that its facility variants fit %d", config.MaxFacilityTrackedEventLen, uum.MaxNameLen)}
		}
		m[n] = struct{}{}
	}
	return m, nil
}

// variantSuffixes checks the call's facility ids and returns the suffixes
// of its variants, in order, without duplicates: in user mode the user's
// tracked facilities; in explicit mode the given ids that are tracked and
// the user's.
func (c *Client) variantSuffixes(user User, o callOptions) ([]string, error) {
	var mine facilitySet
	if err := mine.addAll("user_facility_ids", user.FacilityIDs); err != nil {
		return nil, err
	}
	ids := user.FacilityIDs
	if o.explicit {
		var given facilitySet
		if err := given.addAll("event_facility_ids", o.facilities); err != nil {
			return nil, err
		}
		ids = o.facilities
	}
	var out []string
	var done facilitySet
	for _, id := range ids {
		s, tracked := c.tracked[id]
		if !tracked || !mine.has(id) || done.has(id) {
			continue
		}
		done.add(id)
		if o.explicit {
			out = append(out, s.explicit)
		} else {
			out = append(out, s.site)
		}
	}
	return out, nil
}

// facilitySet is a set of valid facility ids, 3 digits each: one bit per
// possible id, so building and probing it neither allocates nor hashes.
type facilitySet [1000/64 + 1]uint64

// addAll checks ids, at most MaxFacilityIDs valid ones, and adds them.
// field names the list for the error.
func (s *facilitySet) addAll(field string, ids []string) error {
	if len(ids) > MaxFacilityIDs {
		return &uum.ValidationError{Field: field, Reason: fmt.Sprintf("must contain at most %d facility ids, got %d", MaxFacilityIDs, len(ids))}
	}
	for i, id := range ids {
		if uum.ValidateFacilityID("", id) != nil {
			// Again with the field path, built only on failure.
			return uum.ValidateFacilityID(fmt.Sprintf("%s[%d]", field, i), id)
		}
		s.add(id)
	}
	return nil
}

// index maps a valid facility id to 0-999.
func index(id string) int { return int(id[0]-'0')*100 + int(id[1]-'0')*10 + int(id[2]-'0') }

func (s *facilitySet) add(id string)      { i := index(id); s[i/64] |= 1 << (i % 64) }
func (s *facilitySet) has(id string) bool { i := index(id); return s[i/64]&(1<<(i%64)) != 0 }
