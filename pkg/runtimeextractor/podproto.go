package runtimeextractor

// The diagnosis's decoder of one pod list response: the API server's
// protobuf envelope walked as a stream, one pod at a time, keeping only the
// facts the diagnosis reads (podFacts).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// Field numbers, from the generated.proto files of k8s.io/apimachinery
// (runtime.Unknown, meta/v1) and k8s.io/api (core/v1).
const (
	unknownTypeMeta        = 1 // runtime.Unknown.typeMeta
	unknownRaw             = 2 // runtime.Unknown.raw: the PodList
	unknownContentEncoding = 3 // runtime.Unknown.contentEncoding
	typeMetaKind           = 2 // runtime.TypeMeta.kind
	podListMetadata        = 1 // PodList.metadata: ListMeta
	podListItems           = 2 // PodList.items: Pod, repeated
	listMetaContinue       = 3 // ListMeta.continue
	podMetadata            = 1 // Pod.metadata: ObjectMeta
	podSpec                = 2 // Pod.spec: PodSpec
	podStatus              = 3 // Pod.status: PodStatus
	objectMetaOwnerRefs    = 13
	ownerReferenceUID      = 4
	podSpecNodeName        = 10
	podStatusConditions    = 2
	podConditionType       = 1
	podConditionStatus     = 2
)

// maxPodBytes bounds one pod (and the list's metadata) in the body: far
// above what etcd stores (1.5 MiB a value by default), and low enough that
// a corrupt length cannot make the decoder allocate without bound.
const maxPodBytes = 16 << 20

// podListDecoder walks a protobuf runtime.Unknown holding a PodList from a
// stream: it reads one item at a time into buf, reused, so that its memory is
// that of the largest pod, whatever the page's size.
type podListDecoder struct {
	r        *bufio.Reader
	buf      []byte
	ownerUID string
	each     func(podFacts)
	cont     string
}

// unknown reads the envelope to the end of the body.
func (d *podListDecoder) unknown() error {
	sawList := false
	for {
		num, typ, _, err := d.tag()
		if errors.Is(err, io.EOF) {
			break // the body ends between two fields
		}
		if err != nil {
			return err
		}
		switch {
		case num == unknownRaw && typ == protowire.BytesType:
			size, _, err := d.varint()
			if err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			if err := d.podList(size); err != nil {
				return err
			}
			sawList = true
		case (num == unknownTypeMeta || num == unknownContentEncoding) && typ == protowire.BytesType:
			b, err := d.message("envelope field", maxPodBytes)
			if err != nil {
				return err
			}
			if num == unknownContentEncoding && len(b) > 0 {
				return fmt.Errorf("content encoding %q not supported", b)
			}
			if num == unknownTypeMeta {
				if err := checkKind(b); err != nil {
					return err
				}
			}
		default:
			if _, err := d.skip(num, typ, -1); err != nil {
				return err
			}
		}
	}
	if !sawList {
		return errors.New("no object in the body")
	}
	return nil
}

// checkKind fails on an object that is not a PodList.
func checkKind(typeMeta []byte) error {
	return eachField(typeMeta, func(num protowire.Number, v []byte) error {
		if num == typeMetaKind && len(v) > 0 && string(v) != "PodList" {
			return fmt.Errorf("object of kind %q, want PodList", v)
		}
		return nil
	})
}

// podList reads a PodList of size bytes: its metadata, then its items.
func (d *podListDecoder) podList(size uint64) error {
	left := int64(min(size, 1<<62))
	for left > 0 {
		num, typ, n, err := d.tag()
		if err != nil {
			return fmt.Errorf("pod list: %w", noEOF(err))
		}
		left -= int64(n)
		if typ != protowire.BytesType || (num != podListMetadata && num != podListItems) {
			if n, err = d.skip(num, typ, left); err != nil {
				return fmt.Errorf("pod list: %w", err)
			}
			left -= int64(n)
			continue
		}
		size, n, err := d.varint()
		if err != nil {
			return fmt.Errorf("pod list: %w", noEOF(err))
		}
		left -= int64(n)
		if size > uint64(max(left, 0)) || size > maxPodBytes {
			return fmt.Errorf("pod list: field %d of %d bytes, past the list's end or above %d", num, size, maxPodBytes)
		}
		b, err := d.read(int(size))
		if err != nil {
			return fmt.Errorf("pod list: field %d: %w", num, err)
		}
		left -= int64(size)
		if num == podListMetadata {
			err = d.listMeta(b)
		} else {
			err = d.pod(b)
		}
		if err != nil {
			return err
		}
	}
	if left < 0 {
		return fmt.Errorf("pod list: fields run %d bytes past its length", -left)
	}
	return nil
}

func (d *podListDecoder) listMeta(b []byte) error {
	err := eachField(b, func(num protowire.Number, v []byte) error {
		if num == listMetaContinue {
			d.cont = string(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list metadata: %w", err)
	}
	return nil
}

// pod reads one item's facts and hands them to each. b is d.buf: nothing
// of it is kept but the node's name, copied.
func (d *podListDecoder) pod(b []byte) error {
	var p podFacts
	readySeen := false
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case podMetadata:
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num != objectMetaOwnerRefs {
					return nil
				}
				return eachField(v, func(num protowire.Number, v []byte) error {
					if num == ownerReferenceUID && string(v) == d.ownerUID {
						p.owned = true
					}
					return nil
				})
			})
		case podSpec:
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == podSpecNodeName {
					p.nodeName = string(v)
				}
				return nil
			})
		case podStatus:
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num != podStatusConditions {
					return nil
				}
				var typ, status []byte
				if err := eachField(v, func(num protowire.Number, v []byte) error {
					switch num {
					case podConditionType:
						typ = v
					case podConditionStatus:
						status = v
					}
					return nil
				}); err != nil {
					return err
				}
				// The first Ready condition counts, as podReady reads it.
				if !readySeen && string(typ) == string(corev1.PodReady) {
					readySeen, p.ready = true, string(status) == string(corev1.ConditionTrue)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pod: %w", err)
	}
	d.each(p)
	return nil
}

// eachField calls f with the number and content of every length-delimited
// field of the message b (the only kind the decoder reads), skipping others.
func eachField(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		if err := f(num, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// tag reads a field's tag and returns its length; io.EOF only if the stream
// ends before its first byte.
func (d *podListDecoder) tag() (protowire.Number, protowire.Type, int, error) {
	v, n, err := d.varint()
	if err != nil {
		return 0, 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, 0, fmt.Errorf("invalid field number %d", num)
	}
	return num, typ, n, nil
}

// varint reads a varint and returns its length; io.EOF only if the stream
// ends before its first byte.
func (d *podListDecoder) varint() (uint64, int, error) {
	b, err := d.r.Peek(maxVarintLen)
	if len(b) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return 0, 0, io.EOF
		}
		return 0, 0, err
	}
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err // a read error cut the varint short
		}
		return 0, 0, protowire.ParseError(n)
	}
	_, _ = d.r.Discard(n) // peeked: cannot fail
	return v, n, nil
}

// maxVarintLen is the longest varint.
const maxVarintLen = 10

// read reads the next n bytes into d.buf, grown as needed and reused.
func (d *podListDecoder) read(n int) ([]byte, error) {
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, noEOF(err)
	}
	return b, nil
}

// message reads a length-delimited field's content of at most limit bytes.
func (d *podListDecoder) message(what string, limit uint64) ([]byte, error) {
	size, _, err := d.varint()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, noEOF(err))
	}
	if size > limit {
		return nil, fmt.Errorf("%s of %d bytes, above %d", what, size, limit)
	}
	b, err := d.read(int(size))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// skip reads past a field's value (its tag read) of at most left bytes
// (left < 0: unbounded) and returns its length.
func (d *podListDecoder) skip(num protowire.Number, typ protowire.Type, left int64) (int, error) {
	var n int
	switch typ {
	case protowire.VarintType:
		_, vn, err := d.varint()
		if err != nil {
			return 0, fmt.Errorf("field %d: %w", num, noEOF(err))
		}
		return vn, nil
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		size, vn, err := d.varint()
		if err != nil {
			return 0, fmt.Errorf("field %d: %w", num, noEOF(err))
		}
		if left >= 0 && size > uint64(left) || size > 1<<40 {
			return 0, fmt.Errorf("field %d of %d bytes, past its message's end", num, size)
		}
		if _, err := d.r.Discard(int(size)); err != nil {
			return 0, fmt.Errorf("field %d: %w", num, noEOF(err))
		}
		return vn + int(size), nil
	default:
		return 0, fmt.Errorf("field %d: wire type %d not supported", num, typ)
	}
	if _, err := d.r.Discard(n); err != nil {
		return 0, fmt.Errorf("field %d: %w", num, noEOF(err))
	}
	return n, nil
}

// noEOF turns an end of stream inside a field into io.ErrUnexpectedEOF: the
// body was cut short.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fewestNames sorts names, drops repeats and keeps the first maxStuckNodes.
func fewestNames(names []string) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), maxStuckNodes)]
}
