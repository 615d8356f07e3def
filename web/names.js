// Names that can be told apart: two players may both be called "Cleo", so a name is shown with a short
// tag made from the player's id (stable for life, the same on every screen): "Cleo #7K2M".
// Pure (tests/web/names.test.mjs runs it under node).

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";  // Crockford's base 32: no I, L, O or U to misread
const TAG_LENGTH = 4;

/** The tag of a player id: 4 characters of its FNV-1a hash (a million tags). */
export function playerTag(id) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i += 1) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  let tag = "";
  for (let i = 0; i < TAG_LENGTH; i += 1) {
    tag += ALPHABET[hash & 31];
    hash >>>= 5;
  }
  return tag;
}

/** A player ({id, name}) as every screen names them. */
export function playerLabel(player) {
  return `${player.name} #${playerTag(player.id)}`;
}
