"""Builds the hostile inputs of BENCHMARKS.md's issue-11 section, from the format description
alone (spec sections 3-8), on stdout:

    python3 benches/hostile_inputs.py flood  > flood.cobs    # 100,000 distinct dictionary blocks
    python3 benches/hostile_inputs.py claims > claims.cobs   # 45,000 zstd blocks claiming 64 MiB

An optional second argument sets the number of blocks (the fuzz regressions' small floods).

Each ends with one data block holding the record "after". `claims` needs the zstd command.
"""
import zlib, struct, sys
def varint(n):
    z=(n<<1)^(n>>63); out=bytearray()
    while True:
        b=z&0x7f; z>>=7
        if z: out.append(b|0x80)
        else: out.append(b); return bytes(out)
def cobs(data):
    out=bytearray(); block=bytearray()
    for b in data:
        if b==0:
            out.append(len(block)+1); out+=block; block=bytearray()
        else:
            block.append(b)
            if len(block)==254:
                out.append(0xff); out+=block; block=bytearray()
    out.append(len(block)+1); out+=block
    return bytes(out)
def block(t, fields, stored, plain):
    tf=varint(t); crc=zlib.crc32(tf+fields+plain)
    body=fields+stored+struct.pack('<I',crc)
    enc=cobs(body)
    return tf+varint(len(enc)+1)+enc+b'\x00'
start=b'\x00'+block(1,b'\x00',b'COBSFILE'+varint(1),b'COBSFILE'+varint(1))
def data(recs):
    p=varint(len(recs))
    for r in recs: p+=varint(len(r))+r
    return p
kind=sys.argv[1]
count=int(sys.argv[2]) if len(sys.argv)>2 else None
out=bytearray(start)
if kind=='flood':
    for i in range(count or 100000):
        d=b'dictionary'+struct.pack('<I',i)
        out+=block(4,b'\x00',d,d)
    out+=block(3,b'\x00',data([b'after']),data([b'after']))
elif kind=='claims':
    # zstd frame of 'tiny' payload without content size (from zstd CLI earlier)
    payload=data([b'tiny'])
    import subprocess
    frame=subprocess.run(['zstd','-q','-1','--no-check','-c'],input=payload,capture_output=True).stdout
    fields=varint(1)+varint(64<<20)
    for i in range(count or 45000):
        out+=block(3,fields,frame,payload)
    out+=block(3,b'\x00',data([b'after']),data([b'after']))
sys.stdout.buffer.write(out)
