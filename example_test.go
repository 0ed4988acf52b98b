package uum_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/uumhq/uum"
)

func ExampleEvent_MarshalWire() {
	id, err := uum.ParseUUID("user_id", "5F0C6A8E-3B1D-4C2A-9E7F-1A2B3C4D5E6F")
	if err != nil {
		panic(err)
	}
	e := uum.Event{UserID: id, Name: "login"}
	wire := e.MarshalWire(time.UnixMilli(1767225600123))
	fmt.Println(string(wire))

	back, err := uum.DecodeWire(wire)
	fmt.Println(back.Event == e, back.BufferedAt.Format(time.RFC3339Nano), err)
	// Output:
	// {"v":2,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login","buffered_at":1767225600123}
	// true 2026-01-01T00:00:00.123Z <nil>
}

func ExampleDecodeWire_poison() {
	_, err := uum.DecodeWire([]byte(`{"v":3,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login"}`))
	var derr *uum.DecodeError
	fmt.Println(errors.As(err, &derr))
	fmt.Println(derr.Reason)
	// Output:
	// true
	// unsupported wire version 3
}
