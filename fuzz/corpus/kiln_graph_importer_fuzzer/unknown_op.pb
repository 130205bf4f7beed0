
u
x"
m
frobnicatex*m