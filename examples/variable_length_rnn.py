"""A variable-length RNN over a padded batch, two ways that must agree:
a per-sample loop over each sequence's true length with RNNCell, and the
packed-sequence form with nn.RNN (which skips the padding)."""
import tracejit as tj
from tracejit import nn
from tracejit.nn.utils.rnn import pack_padded_sequence, pad_sequence


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    lengths = [5, 2, 7, 3]
    sequences = [tj.randn(n, 3) for n in lengths]
    padded = pad_sequence(sequences)                       # [7, 4, 3], zeros past each end
    rnn = nn.RNN(3, 8)
    cell = nn.RNNCell(3, 8)
    cell.load_state_dict({k[:-3]: v for k, v in rnn.state_dict().items()})  # same weights

    loop_h = []
    for b, n in enumerate(lengths):                        # dynamic: a loop per sample
        h = tj.zeros(1, 8)
        for t in range(n):
            h = cell(padded[t, b:b + 1], h)
        loop_h.append(h)
    loop_h = tj.cat(loop_h)

    _, packed_h = rnn(pack_padded_sequence(padded, lengths, enforce_sorted=False))
    diff = (loop_h - packed_h[0]).abs().max().item()
    print(f"final hidden states, per-sample loop vs packed RNN: max |diff| = {diff:.2e}")
    return {"max_diff": diff, "shape": tuple(packed_h.shape)}


if __name__ == "__main__":
    main()
