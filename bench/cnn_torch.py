#!/usr/bin/python3
"""The CNN of examples/cnn.ts in PyTorch, on the same kind of synthetic
28x28 images, for the epoch-time comparison in bench/NOTES.md.

Run as the timing method asks (a current OpenBLAS without this machine's
workaround variables):

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/cnn_torch.py [epochs] [train]

Prints one line per epoch: loss, test accuracy and seconds of training
(wall clock and processor time). With --serve [train] it reads one JSON
command per line on stdin and answers one JSON line, so that
`deno task bench --filter conv --peers` times its epochs round-robin with
multigrad's (bench/peers/pytorch.ts):

  {"case": "epoch"}   -> {"ms": 812.5, "cpu_ms": 790.1, "loss": 0.02}   one epoch
  {"info": true}      -> {"torch": "1.13.0", "threads": 1}
"""

import json
import sys
import time

import torch
from torch import nn


class Cnn(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.25), nn.Linear(32 * 7 * 7, 64),
            nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def synthetic_images(count, classes, gen):
    """Each class a fixed pattern of three strokes, shifted by up to 2
    pixels, plus noise (the same recipe as examples/cnn.ts, other numbers)."""
    pat_gen = torch.Generator().manual_seed(12345)
    patterns = torch.zeros(classes, 28, 28)
    for c in range(classes):
        for _ in range(3):
            horizontal, at, start, length = (
                torch.randint(0, 2, (1,), generator=pat_gen).item(),
                torch.randint(4, 24, (1,), generator=pat_gen).item(),
                torch.randint(0, 10, (1,), generator=pat_gen).item(),
                torch.randint(10, 18, (1,), generator=pat_gen).item())
            if horizontal:
                patterns[c, at, start:start + length] = 1
            else:
                patterns[c, start:start + length, at] = 1
    labels = torch.randint(0, classes, (count,), generator=gen)
    images = torch.zeros(count, 1, 28, 28)
    shifts = torch.randint(-2, 3, (count, 2), generator=gen)
    for n in range(count):
        images[n, 0] = torch.roll(patterns[labels[n]], tuple(shifts[n].tolist()), (0, 1))
    images += 0.3 * torch.randn(images.shape, generator=gen)
    return images, labels


def setup(train_count):
    """The model, data, loader and optimizer of examples/cnn.ts, and a
    function training one epoch that returns (mean loss, wall s, processor s)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = synthetic_images(train_count, 10, gen)
    x_test, y_test = synthetic_images(512, 10, gen)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_train, y_train), batch_size=64,
        shuffle=True)
    model = Cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()

    def train_epoch():
        model.train()
        t0 = time.perf_counter()
        c0 = time.process_time()
        total, batches = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        return total / batches, time.perf_counter() - t0, time.process_time() - c0

    return model, train_epoch, x_test, y_test


def serve(train_count):
    _, train_epoch, _, _ = setup(train_count)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("info"):
            out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
        else:
            loss, seconds, cpu_seconds = train_epoch()
            out = {"ms": seconds * 1000, "cpu_ms": cpu_seconds * 1000, "loss": loss}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    train_count = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    model, train_epoch, x_test, y_test = setup(train_count)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for epoch in range(epochs):
        loss, seconds, cpu_seconds = train_epoch()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
        print(f"epoch {epoch + 1}: loss {loss:.4f}, test accuracy "
              f"{100 * accuracy:.1f}%, {seconds:.2f} s (processor "
              f"{cpu_seconds:.2f} s)")


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve(int(sys.argv[2]) if len(sys.argv) > 2 else 2048)
    else:
        main()
