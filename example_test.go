package uum_test

import (
	"errors"
	"fmt"

	"github.com/uumhq/uum"
)

func ExampleEvent_MarshalWire() {
	id, err := uum.ParseUUID("user_id", "5F0C6A8E-3B1D-4C2A-9E7F-1A2B3C4D5E6F")
	if err != nil {
		panic(err)
	}
	e := uum.Event{UserID: id, Name: "login"}
	wire := e.MarshalWire()
	fmt.Println(string(wire))

	back, err := uum.DecodeWire(wire)
	fmt.Println(back == e, err)
	// Output:
	// {"v":1,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login"}
	// true <nil>
}

func ExampleDecodeWire_poison() {
	_, err := uum.DecodeWire([]byte(`{"v":2,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login"}`))
	var derr *uum.DecodeError
	fmt.Println(errors.As(err, &derr))
	fmt.Println(derr.Reason)
	// Output:
	// true
	// unsupported wire version 2
}
