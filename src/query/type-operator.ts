/**
 * `$type` as MongoDB reads it: a field matches when its value has the type,
 * or, being an array, when one of its elements has it (`{tags: ['a']}` is of
 * type 'string', `{items: [{k: 1}]}` of type 'object', and so is `items.k`
 * of type 'number'). mingo's tests the value as a whole only.
 */
import { $type as wholeValueType } from 'mingo/operators/query';
import { resolve } from 'mingo/util';

export const $type: typeof wholeValueType = (selector, value, options) => {
  const whole = wholeValueType(selector, value, options);
  const element = wholeValueType('element', value, options);
  return (doc) => {
    if (whole(doc)) return true;
    const found = resolve(doc, selector) as unknown;
    return Array.isArray(found) && found.some((item) => element({ element: item }));
  };
};
