"""``wds:DIR`` datasets: WebDataset shards, ``DIR/train-*.tar`` and ``DIR/test-*.tar`` (or
``validation-*`` / ``val-*``).

Each sample is the tar members that share a key (the member's path up to the first dot of its
name, WebDataset's rule): an image ``KEY.jpg`` / ``.jpeg`` / ``.png`` / ``.webp`` and its label
``KEY.cls`` (an integer as text). Class names come from ``DIR/classes.txt`` (one per line, label
``i`` on line ``i``) when there is one, else the labels are the names (``0`` .. ``K-1``, ``K`` the
largest training label plus one).

The shards are listed once (tar headers and the small ``.cls`` members; the images are not read),
and every image becomes a reference (shard, offset, size) into its shard, so the rest is the image
folder's path (:func:`quicktrain.data.imagefolder.arrays_from_listings`): photos go through the
same memory-mapped store, built in parallel, a chunk of one shard per task (so the build's
workers split the shards between them), with the same crops; thumbnails (CIFAR as shards) are
decoded into memory. Each epoch then shuffles every sample, not a buffer's worth, and torchrun
ranks share the store as they share an image folder's. Uncompressed ``.tar`` shards only
(WebDataset's usual form: JPEGs do not compress).

Every bad shard or sample is one line naming it: a shard that is not a tar file, a sample
without an image or without ``.cls``, a label that is not an integer or is out of range, a
missing split.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quicktrain.data.arrays import Arrays
from quicktrain.data.imagefolder import HELD_OUT, Listing, Reading, arrays_from_listings
from quicktrain.errors import DataError

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")


@dataclass(frozen=True)
class TarMember:
    """One image inside a shard, read with one seek: a :class:`~quicktrain.data.decode.ByteRef`."""

    shard: str
    offset: int
    size: int
    member: str
    shard_mtime: int

    @property
    def name(self) -> str:
        return f"{self.shard}:{self.member}"

    def read(self) -> bytes:
        with open(self.shard, "rb") as f:
            f.seek(self.offset)
            return f.read(self.size)

    def identity(self) -> str:
        return f"{self.shard}|{self.shard_mtime}|{self.offset}|{self.size}"

    def nbytes(self) -> int:
        return self.size


def shards(root: Path, split: str) -> list[Path]:
    return sorted(root.glob(f"{split}-*.tar"))


def held_out_shards(root: Path, asked: str = "auto") -> tuple[str, list[Path]]:
    names = HELD_OUT if asked == "auto" else (asked,)
    for name in names:
        found = shards(root, name)
        if found:
            return name, found
    wanted = " or ".join(f"'{root}/{name}-*.tar'" for name in names)
    raise DataError(f"wds:{root} has no held-out shards: expected {wanted}")


def _key_and_extension(member: str) -> tuple[str, str]:
    folder, _, base = member.rpartition("/")
    stem, _, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), extension.lower()


def read_shard(shard: Path) -> list[tuple[str, TarMember | None, str | None]]:
    """(key, image reference, label text) of every sample in ``shard``, in the shard's order."""
    samples: dict[str, list] = {}
    mtime = shard.stat().st_mtime_ns
    try:
        with tarfile.open(shard, "r:") as tar:
            for info in tar:
                if not info.isfile():
                    continue
                key, extension = _key_and_extension(info.name)
                if key.rpartition("/")[2].startswith("."):
                    continue  # hidden members (._x from macOS tar) are not samples
                entry = samples.setdefault(key, [None, None])
                if extension in IMAGE_EXTENSIONS and entry[0] is None:
                    entry[0] = TarMember(str(shard), info.offset_data, info.size, info.name, mtime)
                elif extension == "cls":
                    entry[1] = tar.extractfile(info).read().decode("utf-8", "replace").strip()
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataError(f"shard '{shard}' is not a readable tar file: {' '.join(str(err).split())[:120]}") from None
    return [(key, image, label) for key, (image, label) in samples.items()]


def list_shards(found: list[Path], classes: list[str] | None) -> tuple[list[TarMember], list[int]]:
    """The image references and integer labels of every sample of ``found`` (in shard order)."""
    images, labels = [], []
    for shard in found:
        for key, image, label in read_shard(shard):
            where = f"sample '{key}' in shard '{shard}'"
            if image is None:
                raise DataError(f"{where} has no image (.{', .'.join(IMAGE_EXTENSIONS)})")
            if label is None:
                raise DataError(f"{where} has no .cls label (an integer class index)")
            try:
                value = int(label)
            except ValueError:
                raise DataError(f"{where}: its .cls '{label[:40]}' is not an integer class index") from None
            if value < 0 or (classes is not None and value >= len(classes)):
                have = f"{len(classes)} classes in classes.txt" if classes is not None else "labels start at 0"
                raise DataError(f"{where}: label {value} is out of range ({have})")
            images.append(image)
            labels.append(value)
    return images, labels


def load_wds(path: str | Path, reading: Reading) -> Arrays:
    root = Path(path).expanduser()
    if not root.is_dir():
        raise DataError(f"wds path '{root}' does not exist or is not a folder")
    compressed = sorted(root.glob("*.tar.gz")) + sorted(root.glob("*.tgz"))
    if compressed:
        raise DataError(f"shard '{compressed[0]}' is compressed; wds: reads uncompressed .tar shards (tar cf)")
    train_shards = shards(root, "train")
    if not train_shards:
        raise DataError(f"wds:{root} has no training shards: expected '{root}/train-*.tar'")
    names_file = root / "classes.txt"
    names = None
    if names_file.is_file():
        names = [line.strip() for line in names_file.read_text().splitlines() if line.strip()]
    images, labels = list_shards(train_shards, names)
    if not images:
        raise DataError(f"the training shards of wds:{root} hold no samples")
    classes = names or [str(i) for i in range(max(labels) + 1)]
    train = Listing(classes, images, np.asarray(labels, dtype=np.int64))
    test, notes = None, [f"{len(train_shards)} training shards"]
    if reading.load_test:
        split, held_out = held_out_shards(root, reading.photo.eval_split)
        test_images, test_labels = list_shards(held_out, classes)
        if not test_images:
            raise DataError(f"the held-out shards of wds:{root} ({split}-*.tar) hold no samples")
        test = Listing(classes, test_images, np.asarray(test_labels, dtype=np.int64))
        notes.append(f"held-out split: {split}-*.tar ({len(held_out)} shards)")
    return arrays_from_listings(f"wds:{root}", str(root), train, test, reading, tuple(notes))
