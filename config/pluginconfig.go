package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// configJSON evaluates the attributes of a plugin's config block into a JSON object.
func (d *decoder) configJSON(body hcl.Body) json.RawMessage {
	sb := body.(*hclsyntax.Body) // hclsyntax.ParseConfig yields only native syntax bodies
	for _, b := range sb.Blocks {
		d.fail(b.TypeRange, "Blocks are not allowed in config",
			fmt.Sprintf("Write %q as an object attribute instead: %s = { ... }.", b.Type, b.Type))
	}
	obj := make(map[string]any, len(sb.Attributes))
	for name, a := range sb.Attributes {
		v, diags := a.Expr.Value(d.ctx)
		d.add(diags)
		if diags.HasErrors() {
			continue
		}
		j, err := jsonValue(v)
		if err != nil {
			d.fail(a.Expr.Range(), "Invalid config value", fmt.Sprintf("Attribute %q: %v.", name, err))
			continue
		}
		obj[name] = j
	}
	raw, _ := json.Marshal(obj) // cannot fail: jsonValue yields only encodable values
	return raw
}

// jsonValue converts v into the value encoding/json encodes as the same JSON.
func jsonValue(v cty.Value) (any, error) {
	if !v.IsWhollyKnown() {
		return nil, errors.New("the value is not known")
	}
	if v.IsNull() {
		return nil, nil
	}
	switch t := v.Type(); {
	case t == cty.String:
		return v.AsString(), nil
	case t == cty.Bool:
		return v.True(), nil
	case t == cty.Number:
		return jsonNumber(v.AsBigFloat())
	case t.IsObjectType() || t.IsMapType():
		m := make(map[string]any, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			j, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			m[k.AsString()] = j
		}
		return m, nil
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		s := make([]any, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			j, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			s = append(s, j)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("a %s cannot be written as JSON", t.FriendlyName())
	}
}

// jsonNumber keeps integers exact within int64 and otherwise rounds to float64,
// refusing numbers beyond its range.
func jsonNumber(f *big.Float) (any, error) {
	if i, acc := f.Int64(); acc == big.Exact {
		return i, nil
	}
	if x, _ := f.Float64(); !math.IsInf(x, 0) {
		return x, nil
	}
	return nil, fmt.Errorf("the number %s is out of range", f.Text('g', 10))
}
