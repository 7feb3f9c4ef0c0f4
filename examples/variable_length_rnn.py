"""A variable-length RNN over a padded batch, two ways that must agree:
a per-sample loop over each sequence's true length with RNNCell, and the
packed-sequence form with nn.RNN (which skips the padding). tj.script compiles the
per-sample loop once, with the lengths as data of the program."""
import tracejit as tj
from tracejit import nn
from tracejit.nn.utils.rnn import pack_padded_sequence, pad_sequence


class PerSampleLoop(nn.Module):
    """Each sequence of a padded [T, B, F] batch stepped over its own length."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, padded, lengths):
        hs = []
        for b in range(padded.shape[1]):
            h = tj.zeros(1, self.cell.hidden_size)
            for t in range(int(lengths[b])):
                h = self.cell(padded[t, b:b + 1], h)
            hs.append(h)
        return tj.cat(hs)


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    lengths = [5, 2, 7, 3]
    sequences = [tj.randn(n, 3) for n in lengths]
    padded = pad_sequence(sequences)                       # [7, 4, 3], zeros past each end
    rnn = nn.RNN(3, 8)
    cell = nn.RNNCell(3, 8)
    cell.load_state_dict({k[:-3]: v for k, v in rnn.state_dict().items()})  # same weights

    loop = PerSampleLoop(cell)
    loop_h = loop(padded, tj.tensor(lengths))              # eager: a loop per sample

    _, packed_h = rnn(pack_padded_sequence(padded, lengths, enforce_sorted=False))
    diff = (loop_h - packed_h[0]).abs().max().item()
    print(f"final hidden states, per-sample loop vs packed RNN: max |diff| = {diff:.2e}")

    scripted = tj.script(loop)
    script_diff = (scripted(padded, tj.tensor(lengths)) - loop_h).abs().max().item()
    other = [tj.randn(n, 3) for n in (4, 9, 1)]            # other batch, other lengths
    eager_other = loop(pad_sequence(other), tj.tensor([4, 9, 1]))
    script_diff = max(script_diff, (scripted(pad_sequence(other), tj.tensor([4, 9, 1]))
                                    - eager_other).abs().max().item())
    print(f"the loop under tj.script vs eager, for two batches of other lengths: "
          f"max |diff| = {script_diff:.2e}, compiles: {scripted.stats['compiles']}")
    return {"max_diff": diff, "shape": tuple(packed_h.shape), "script_diff": script_diff,
            "compiles": scripted.stats["compiles"]}


if __name__ == "__main__":
    main()
